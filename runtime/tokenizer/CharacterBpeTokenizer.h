#ifndef KVJIT_RUNTIME_TOKENIZER_CHARACTERBPETOKENIZER_H
#define KVJIT_RUNTIME_TOKENIZER_CHARACTERBPETOKENIZER_H

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "runtime/tokenizer/DecoderChain.h"
#include "runtime/tokenizer/Tokenizer.h"
#include "runtime/tokenizer/WordSplitter.h"

namespace kvjit::tokenizer {

// tokenizer.json's BPE model over Unicode characters, as the files of
// SentencePiece-born families (Llama 2, Mistral, Gemma, Phi-3) use it and
// Hugging Face's tokenizers runs it: the split rules and then Metaspace cut
// the normalized text into words; each character of a word starts as its
// token, or as its <0xXX> byte tokens (byte_fallback), or as the unknown
// token (neighbours fused into one with fuse_unk); then the adjacent pair
// with the best-ranked merge joins first, the leftmost on a tie. The
// vocabulary's decoder steps turn tokens back into text.
class CharacterBpeTokenizer final : public Tokenizer {
 public:
  static absl::StatusOr<std::unique_ptr<Tokenizer>> Create(
      Vocabulary vocabulary);

  std::string Decode(absl::Span<const int32_t> ids) const override;
  std::string TokenToPiece(int32_t id) const override;

 private:
  explicit CharacterBpeTokenizer(Vocabulary vocabulary);

  absl::Status EncodePlainText(const PlainText& plain,
                               std::vector<int32_t>* ids) const override;
  // Metaspace's rewriting of one piece and the words it cuts it into.
  std::vector<std::string> ApplyMetaspace(std::string_view piece,
                                          bool starts_input) const;
  absl::Status EncodeWord(std::string_view word,
                          std::vector<int32_t>* ids) const;
  // A word's first symbols: a token per character, or byte or unknown
  // tokens for characters outside the vocabulary.
  absl::StatusOr<std::vector<int32_t>> InitialSymbols(
      std::string_view word) const;
  // Skips the tokens Decode leaves out (control, unknown, unused).
  bool IsDecoded(int32_t id) const;

  struct Merge {
    int32_t rank;
    int32_t merged_id;
  };
  struct PairHash {
    size_t operator()(std::pair<int32_t, int32_t> pair) const {
      return absl::HashOf(pair.first, pair.second);
    }
  };

  std::unique_ptr<WordSplitter> word_splitter_;
  DecoderChain decoder_;
  std::array<int32_t, 256> byte_token_ids_;
  absl::flat_hash_map<std::pair<int32_t, int32_t>, Merge, PairHash> merges_;
};

}  // namespace kvjit::tokenizer

#endif  // KVJIT_RUNTIME_TOKENIZER_CHARACTERBPETOKENIZER_H
