#ifndef KVJIT_RUNTIME_TOKENIZER_DECODERCHAIN_H
#define KVJIT_RUNTIME_TOKENIZER_DECODERCHAIN_H

#include <string>
#include <vector>

#include "runtime/tokenizer/Vocabulary.h"

namespace kvjit::tokenizer {

// tokenizer.json's decoder: turns the texts of tokens back into the text they
// stand for, each step rewriting the list as Hugging Face's tokenizers does.
class DecoderChain {
 public:
  explicit DecoderChain(std::vector<DecoderStep> steps)
      : steps_(std::move(steps)) {}

  // The text of `tokens`, which start the text.
  std::string Decode(std::vector<std::string> tokens) const;

  // The text of one token that continues a text: the steps up to Fuse
  // rewrite it as a token that is not the first (steps after Fuse see the
  // whole text at once, whose start is not here), and a <0xXX> token gives
  // its byte even where that byte is part of a character.
  std::string DecodeContinuation(std::string token) const;

 private:
  std::vector<DecoderStep> steps_;
};

}  // namespace kvjit::tokenizer

#endif  // KVJIT_RUNTIME_TOKENIZER_DECODERCHAIN_H
