#ifndef KVJIT_RUNTIME_TOKENIZER_STREAMINGDECODER_H
#define KVJIT_RUNTIME_TOKENIZER_STREAMINGDECODER_H

#include <cstdint>
#include <string>

#include "runtime/tokenizer/Tokenizer.h"

namespace kvjit::tokenizer {

// Turns generated tokens into text as they arrive. A character spread over
// several byte tokens is held back until it is complete, so every chunk
// returned is whole UTF-8 characters (given valid UTF-8 overall). The text
// continues a prompt, so no leading space is removed.
class StreamingDecoder {
 public:
  // `tokenizer` must outlive the decoder.
  explicit StreamingDecoder(const Tokenizer& tokenizer)
      : tokenizer_(tokenizer) {}

  // The text that `id` completes; empty while a character is still partial.
  std::string Push(int32_t id);

  // Whatever is still held back (a character the stream cut short), for the
  // end of the stream.
  std::string Flush();

 private:
  const Tokenizer& tokenizer_;
  std::string pending_;
};

}  // namespace kvjit::tokenizer

#endif  // KVJIT_RUNTIME_TOKENIZER_STREAMINGDECODER_H
