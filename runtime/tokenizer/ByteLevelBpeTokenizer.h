#ifndef KVJIT_RUNTIME_TOKENIZER_BYTELEVELBPETOKENIZER_H
#define KVJIT_RUNTIME_TOKENIZER_BYTELEVELBPETOKENIZER_H

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/tokenizer/ByteLevelAlphabet.h"
#include "runtime/tokenizer/Tokenizer.h"
#include "runtime/tokenizer/WordSplitter.h"

namespace kvjit::tokenizer {

// GPT-2's byte-level BPE (GGUF "gpt2"): after the vocabulary's normalizer,
// the pre-tokenizer's split rules cut the text into words, each word's bytes
// are spelled in GPT-2's byte alphabet, and within a word the adjacent pair
// with the best-ranked merge joins first.
class ByteLevelBpeTokenizer final : public Tokenizer {
 public:
  static absl::StatusOr<std::unique_ptr<Tokenizer>> Create(
      Vocabulary vocabulary);

  std::string TokenToPiece(int32_t id) const override;

 private:
  explicit ByteLevelBpeTokenizer(Vocabulary vocabulary);

  absl::Status EncodePlainText(const PlainText& plain,
                               std::vector<int32_t>* ids) const override;
  // `word` is spelled in the byte alphabet.
  absl::Status EncodeWord(std::string_view word,
                          std::vector<int32_t>* ids) const;
  // The rank of the merge of `left` and `right`, or -1 when there is none.
  int32_t MergeRank(std::string_view left, std::string_view right) const;

  ByteLevelAlphabet alphabet_;
  std::unique_ptr<WordSplitter> word_splitter_;
  // Keys view the vocabulary's merges.
  absl::flat_hash_map<std::pair<std::string_view, std::string_view>, int32_t>
      merge_ranks_;
};

}  // namespace kvjit::tokenizer

#endif  // KVJIT_RUNTIME_TOKENIZER_BYTELEVELBPETOKENIZER_H
