#include "frontend/tokenizer/GgufVocabulary.h"

#include <cstdint>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "runtime/core/StatusMacros.h"

namespace kvjit::tokenizer {
namespace {

constexpr char kModelKey[] = "tokenizer.ggml.model";
constexpr char kPreTokenizerKey[] = "tokenizer.ggml.pre";
constexpr char kTokensKey[] = "tokenizer.ggml.tokens";
constexpr char kTokenTypesKey[] = "tokenizer.ggml.token_type";
constexpr char kScoresKey[] = "tokenizer.ggml.scores";
constexpr char kMergesKey[] = "tokenizer.ggml.merges";
constexpr char kBosKey[] = "tokenizer.ggml.bos_token_id";
constexpr char kEosKey[] = "tokenizer.ggml.eos_token_id";
constexpr char kUnknownKey[] = "tokenizer.ggml.unknown_token_id";
constexpr char kPaddingKey[] = "tokenizer.ggml.padding_token_id";
constexpr char kEndOfTurnKey[] = "tokenizer.ggml.eot_token_id";
constexpr char kAddBosKey[] = "tokenizer.ggml.add_bos_token";
constexpr char kAddEosKey[] = "tokenizer.ggml.add_eos_token";
constexpr char kAddSpacePrefixKey[] = "tokenizer.ggml.add_space_prefix";

// GGUF writers mark an absent special token with -1, stored as uint32.
constexpr int64_t kUnsetTokenId = 0xFFFFFFFF;

absl::Status InFile(const gguf::GgufFile& file, const std::string& detail) {
  return absl::InvalidArgumentError(absl::StrCat(file.path(), ": ", detail));
}

// `status` with the file named, keeping its code.
absl::Status WithPath(const gguf::GgufFile& file, const absl::Status& status) {
  return absl::Status(status.code(),
                      absl::StrCat(file.path(), ": ", status.message()));
}

absl::StatusOr<int32_t> ReadTokenId(const gguf::GgufFile& file,
                                    const char* key) {
  if (!file.Has(key)) return kNoToken;
  KVJIT_ASSIGN_OR_RETURN(int64_t value, file.GetInt(key));
  if (value == -1 || value == kUnsetTokenId) return kNoToken;
  if (value < 0 || value > INT32_MAX) {
    return InFile(file,
                  absl::StrCat(key, " is ", value, ", which is no token id"));
  }
  return static_cast<int32_t>(value);
}

absl::StatusOr<bool> ReadFlag(const gguf::GgufFile& file, const char* key,
                              bool fallback) {
  if (!file.Has(key)) return fallback;
  return file.GetBool(key);
}

absl::StatusOr<std::vector<TokenType>> ReadTokenTypes(
    const gguf::GgufFile& file, size_t token_count) {
  if (!file.Has(kTokenTypesKey)) {
    return std::vector<TokenType>(token_count, TokenType::kNormal);
  }
  KVJIT_ASSIGN_OR_RETURN(std::vector<int64_t> values,
                         file.GetIntArray(kTokenTypesKey));
  std::vector<TokenType> types;
  types.reserve(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    const int64_t value = values[i];
    // 0 is "undefined", which converters write for ordinary tokens.
    if (value == 0) {
      types.push_back(TokenType::kNormal);
    } else if (value >= static_cast<int64_t>(TokenType::kNormal) &&
               value <= static_cast<int64_t>(TokenType::kByte)) {
      types.push_back(static_cast<TokenType>(value));
    } else {
      return InFile(file, absl::StrCat(kTokenTypesKey, "[", i, "] is ", value,
                                       ", not a token type (0 to 6)"));
    }
  }
  return types;
}

absl::StatusOr<std::vector<std::pair<std::string, std::string>>> ReadMerges(
    const gguf::GgufFile& file) {
  std::vector<std::pair<std::string, std::string>> merges;
  if (!file.Has(kMergesKey)) return merges;
  KVJIT_ASSIGN_OR_RETURN(std::vector<absl::string_view> lines,
                         file.GetStringArray(kMergesKey));
  merges.reserve(lines.size());
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string line(lines[i].data(), lines[i].size());
    // Searching from the second byte lets a merge's left half be a space.
    const size_t separator = line.find(' ', 1);
    if (separator == std::string::npos) {
      return InFile(file, absl::StrCat(kMergesKey, "[", i, "] (\"", line,
                                       "\") is not two tokens and a space"));
    }
    merges.emplace_back(line.substr(0, separator), line.substr(separator + 1));
  }
  return merges;
}

}  // namespace

absl::StatusOr<Vocabulary> ReadVocabularyFromGguf(const gguf::GgufFile& file) {
  Vocabulary vocabulary;
  KVJIT_ASSIGN_OR_RETURN(absl::string_view model_name,
                         file.GetString(kModelKey));
  absl::StatusOr<TokenizerModel> model = ParseTokenizerModel(
      std::string_view(model_name.data(), model_name.size()));
  if (!model.ok()) return WithPath(file, model.status());
  vocabulary.model = *model;
  const bool byte_level = vocabulary.model == TokenizerModel::kByteLevelBpe;

  if (byte_level && file.Has(kPreTokenizerKey)) {
    KVJIT_ASSIGN_OR_RETURN(absl::string_view pre_name,
                           file.GetString(kPreTokenizerKey));
    absl::StatusOr<PreTokenizer> pre_tokenizer =
        ParsePreTokenizer(std::string_view(pre_name.data(), pre_name.size()));
    if (!pre_tokenizer.ok()) return WithPath(file, pre_tokenizer.status());
    vocabulary.pre_tokenizer = *pre_tokenizer;
    // llama.cpp's llama-bpe pre-tokenizer stands for Llama 3, whose
    // tokenizer.json sets model.ignore_merges.
    vocabulary.ignore_merges = *pre_tokenizer == PreTokenizer::kLlama3;
  }

  KVJIT_ASSIGN_OR_RETURN(std::vector<absl::string_view> tokens,
                         file.GetStringArray(kTokensKey));
  vocabulary.tokens.reserve(tokens.size());
  for (absl::string_view token : tokens) {
    vocabulary.tokens.emplace_back(token.data(), token.size());
  }
  KVJIT_ASSIGN_OR_RETURN(vocabulary.token_types,
                         ReadTokenTypes(file, vocabulary.tokens.size()));
  if (file.Has(kScoresKey)) {
    KVJIT_ASSIGN_OR_RETURN(vocabulary.scores, file.GetFloatArray(kScoresKey));
  }
  KVJIT_ASSIGN_OR_RETURN(vocabulary.merges, ReadMerges(file));
  KVJIT_ASSIGN_OR_RETURN(vocabulary.bos_id, ReadTokenId(file, kBosKey));
  KVJIT_ASSIGN_OR_RETURN(vocabulary.eos_id, ReadTokenId(file, kEosKey));
  KVJIT_ASSIGN_OR_RETURN(vocabulary.unknown_id, ReadTokenId(file, kUnknownKey));
  KVJIT_ASSIGN_OR_RETURN(vocabulary.padding_id, ReadTokenId(file, kPaddingKey));
  KVJIT_ASSIGN_OR_RETURN(vocabulary.end_of_turn_id,
                         ReadTokenId(file, kEndOfTurnKey));

  const bool adds_bos_by_default =
      !byte_level || vocabulary.pre_tokenizer == PreTokenizer::kLlama3;
  KVJIT_ASSIGN_OR_RETURN(
      vocabulary.add_bos_token,
      ReadFlag(file, kAddBosKey,
               adds_bos_by_default && vocabulary.bos_id != kNoToken));
  KVJIT_ASSIGN_OR_RETURN(vocabulary.add_eos_token,
                         ReadFlag(file, kAddEosKey, false));
  KVJIT_ASSIGN_OR_RETURN(vocabulary.add_space_prefix,
                         ReadFlag(file, kAddSpacePrefixKey, !byte_level));

  if (absl::Status status = ValidateVocabulary(vocabulary); !status.ok()) {
    return WithPath(file, status);
  }
  return vocabulary;
}

absl::StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizerFromGguf(
    const gguf::GgufFile& file) {
  KVJIT_ASSIGN_OR_RETURN(Vocabulary vocabulary, ReadVocabularyFromGguf(file));
  return CreateTokenizer(std::move(vocabulary));
}

}  // namespace kvjit::tokenizer
