#include "runtime/tokenizer/Vocabulary.h"

#include "absl/strings/str_cat.h"

namespace kvjit::tokenizer {
namespace {

absl::Status CheckSpecialId(const Vocabulary& vocabulary, int32_t id,
                            std::string_view role) {
  if (id == kNoToken) return absl::OkStatus();
  if (id < 0 || static_cast<size_t>(id) >= vocabulary.tokens.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tokenizer: ", std::string(role), " token id ", id,
        " is outside the vocabulary of ", vocabulary.tokens.size(), " tokens"));
  }
  return absl::OkStatus();
}

}  // namespace

std::optional<uint8_t> ParseByteToken(std::string_view text) {
  if (text.size() != 6 || text.substr(0, 3) != "<0x" || text[5] != '>') {
    return std::nullopt;
  }
  int value = 0;
  for (char digit : text.substr(3, 2)) {
    int nibble;
    if (digit >= '0' && digit <= '9') {
      nibble = digit - '0';
    } else if (digit >= 'A' && digit <= 'F') {
      nibble = digit - 'A' + 10;
    } else if (digit >= 'a' && digit <= 'f') {
      nibble = digit - 'a' + 10;
    } else {
      return std::nullopt;
    }
    value = value * 16 + nibble;
  }
  return static_cast<uint8_t>(value);
}

absl::StatusOr<TokenizerModel> ParseTokenizerModel(std::string_view name) {
  if (name == "llama") return TokenizerModel::kSentencePiece;
  if (name == "gpt2") return TokenizerModel::kByteLevelBpe;
  return absl::UnimplementedError(
      absl::StrCat("tokenizer: model \"", std::string(name),
                   "\" is not supported (supported: \"llama\", \"gpt2\")"));
}

absl::StatusOr<PreTokenizer> ParsePreTokenizer(std::string_view name) {
  if (name == "default" || name == "gpt2" || name == "gpt-2") {
    return PreTokenizer::kGpt2;
  }
  if (name == "llama3" || name == "llama-v3" || name == "llama-bpe") {
    return PreTokenizer::kLlama3;
  }
  if (name == "smollm") return PreTokenizer::kSmolLm;
  if (name == "qwen2") return PreTokenizer::kQwen2;
  return absl::UnimplementedError(absl::StrCat(
      "tokenizer: pre-tokenizer \"", std::string(name),
      "\" is not supported (supported: \"default\", \"gpt2\", \"gpt-2\", "
      "\"llama3\", \"llama-v3\", \"llama-bpe\", \"smollm\", \"qwen2\")"));
}

absl::Status ValidateVocabulary(const Vocabulary& vocabulary) {
  const size_t size = vocabulary.tokens.size();
  if (size == 0) {
    return absl::InvalidArgumentError("tokenizer: the vocabulary is empty");
  }
  if (size > static_cast<size_t>(INT32_MAX)) {
    return absl::InvalidArgumentError(
        absl::StrCat("tokenizer: ", size, " tokens do not fit 32-bit ids"));
  }
  if (vocabulary.token_types.size() != size) {
    return absl::InvalidArgumentError(
        absl::StrCat("tokenizer: ", vocabulary.token_types.size(),
                     " token types for ", size, " tokens"));
  }
  if (!vocabulary.scores.empty() && vocabulary.scores.size() != size) {
    return absl::InvalidArgumentError(
        absl::StrCat("tokenizer: ", vocabulary.scores.size(), " scores for ",
                     size, " tokens"));
  }
  for (size_t i = 0; i < vocabulary.merges.size(); ++i) {
    const auto& [left, right] = vocabulary.merges[i];
    if (left.empty() || right.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("tokenizer: merge ", i,
                                                     " (\"", left, " ", right,
                                                     "\") has an empty half"));
    }
  }
  if (vocabulary.model == TokenizerModel::kByteLevelBpe &&
      vocabulary.merges.empty()) {
    return absl::InvalidArgumentError(
        "tokenizer: a byte-level BPE vocabulary needs merges");
  }
  for (const auto& [id, role] :
       {std::pair<int32_t, std::string_view>{vocabulary.bos_id, "BOS"},
        {vocabulary.eos_id, "EOS"},
        {vocabulary.unknown_id, "unknown"},
        {vocabulary.padding_id, "padding"},
        {vocabulary.end_of_turn_id, "end-of-turn"}}) {
    if (absl::Status status = CheckSpecialId(vocabulary, id, role);
        !status.ok()) {
      return status;
    }
  }
  for (const AddedTokenOptions& options : vocabulary.added_token_options) {
    if (absl::Status status = CheckSpecialId(vocabulary, options.id, "added");
        !status.ok()) {
      return status;
    }
  }
  if (vocabulary.add_bos_token && vocabulary.bos_id == kNoToken) {
    return absl::InvalidArgumentError(
        "tokenizer: add_bos_token is set but there is no BOS token");
  }
  if (vocabulary.add_eos_token && vocabulary.eos_id == kNoToken) {
    return absl::InvalidArgumentError(
        "tokenizer: add_eos_token is set but there is no EOS token");
  }
  return absl::OkStatus();
}

}  // namespace kvjit::tokenizer
