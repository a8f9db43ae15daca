#ifndef KVJIT_RUNTIME_TOKENIZER_TOKENIZER_H
#define KVJIT_RUNTIME_TOKENIZER_TOKENIZER_H

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "runtime/tokenizer/SpecialTokenSplitter.h"
#include "runtime/tokenizer/TextNormalizer.h"
#include "runtime/tokenizer/Vocabulary.h"

namespace kvjit::tokenizer {

// Turns text into token ids and back. Immutable once built; every method is
// safe to call from several threads at once.
class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // `add_special` adds BOS (and EOS) where the vocabulary asks for them.
  // `parse_special` turns the text of control tokens (such as <|im_start|>)
  // into those tokens; leave it off for untrusted text. User-defined tokens
  // are found either way, as llama.cpp does. Fails on text that is not valid
  // UTF-8, or on a character the vocabulary cannot express.
  absl::StatusOr<std::vector<int32_t>> Encode(std::string_view text,
                                              bool add_special,
                                              bool parse_special) const;

  // The text of `ids`. Control, unknown and unused tokens, and ids outside
  // the vocabulary, add nothing; the space a SentencePiece vocabulary puts in
  // front of the text is removed again. Bytes are returned as they are, even
  // where the ids split a UTF-8 character.
  virtual std::string Decode(absl::Span<const int32_t> ids) const;

  // The bytes one token stands for, under the rules of Decode, without
  // removing any leading space.
  virtual std::string TokenToPiece(int32_t id) const = 0;

  int32_t bos_id() const { return vocabulary_.bos_id; }
  int32_t eos_id() const { return vocabulary_.eos_id; }
  int32_t vocab_size() const {
    return static_cast<int32_t>(vocabulary_.tokens.size());
  }
  // True for EOS, the end-of-turn token and the control tokens chat models
  // end a turn with (<|im_end|>, <|eot_id|>, <|endoftext|>, ...).
  bool IsEndOfGeneration(int32_t id) const {
    return end_of_generation_ids_.contains(id);
  }
  const Vocabulary& vocabulary() const { return vocabulary_; }

 protected:
  explicit Tokenizer(Vocabulary vocabulary);

  // A stretch of input between special tokens.
  struct PlainText {
    std::string_view text;
    // `text` is where the input starts.
    bool starts_input = false;
    // `text` starts the input or follows a special token.
    bool follows_special = false;
    // As Encode was asked.
    bool parse_special = false;
  };

  // Appends the tokens of `plain`, which the vocabulary's normalizer has
  // rewritten and which holds no added token.
  virtual absl::Status EncodePlainText(const PlainText& plain,
                                       std::vector<int32_t>* ids) const = 0;

  // The text of token `id` as decoding sees it: a normalized added token's
  // content as the normalizer rewrites it, as tokenizers gives it.
  std::string_view DecodedSpelling(int32_t id) const;

  // The id of the token spelled exactly `text`, or kNoToken.
  int32_t FindToken(std::string_view text) const;
  TokenType token_type(int32_t id) const { return vocabulary_.token_types[id]; }
  bool IsValidId(int32_t id) const { return id >= 0 && id < vocab_size(); }

 private:
  friend absl::StatusOr<std::unique_ptr<Tokenizer>> CreateTokenizer(
      Vocabulary vocabulary);

  // Builds what may fail to build: the normalizer (its regexes) and what
  // finds the added tokens it rewrites.
  absl::Status BuildNormalizer();
  // Normalizes a stretch of input between the added tokens found in the text
  // as given, and encodes it around those found in the normalized text.
  absl::Status EncodeBetweenAddedTokens(const PlainText& plain,
                                        std::vector<int32_t>* ids) const;

  Vocabulary vocabulary_;
  absl::flat_hash_map<std::string_view, int32_t> id_by_text_;
  absl::flat_hash_set<int32_t> end_of_generation_ids_;
  SpecialTokenSplitter special_token_splitter_;
  std::optional<TextNormalizer> normalizer_;
  std::optional<SpecialTokenSplitter> normalized_token_splitter_;
  absl::flat_hash_map<int32_t, std::string> normalized_spellings_;
};

// Validates `vocabulary` and builds the tokenizer its model names.
absl::StatusOr<std::unique_ptr<Tokenizer>> CreateTokenizer(
    Vocabulary vocabulary);

}  // namespace kvjit::tokenizer

#endif  // KVJIT_RUNTIME_TOKENIZER_TOKENIZER_H
