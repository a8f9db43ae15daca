#ifndef KVJIT_RUNTIME_TOKENIZER_SENTENCEPIECETOKENIZER_H
#define KVJIT_RUNTIME_TOKENIZER_SENTENCEPIECETOKENIZER_H

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/tokenizer/Tokenizer.h"

namespace kvjit::tokenizer {

// SentencePiece's BPE model (GGUF "llama"): spaces become U+2581, the text
// starts as one symbol per character, and the adjacent pair whose joined text
// is the highest-scoring piece merges first. Characters no piece covers fall
// back to <0xXX> byte tokens.
class SentencePieceTokenizer final : public Tokenizer {
 public:
  static absl::StatusOr<std::unique_ptr<Tokenizer>> Create(
      Vocabulary vocabulary);

  std::string TokenToPiece(int32_t id) const override;

 private:
  explicit SentencePieceTokenizer(Vocabulary vocabulary);

  absl::Status EncodePlainText(const PlainText& plain,
                               std::vector<int32_t>* ids) const override;

  // The id of the piece that merging may produce, or kNoToken: only normal
  // and user-defined tokens, as in SentencePiece.
  int32_t FindMergeablePiece(std::string_view text) const;
  float Score(int32_t id) const;
  // Spells a character no piece covers with byte tokens, or else with the
  // unknown token.
  absl::Status AppendByteFallback(std::string_view character,
                                  std::vector<int32_t>* ids) const;

  std::array<int32_t, 256> byte_token_ids_;
};

}  // namespace kvjit::tokenizer

#endif  // KVJIT_RUNTIME_TOKENIZER_SENTENCEPIECETOKENIZER_H
