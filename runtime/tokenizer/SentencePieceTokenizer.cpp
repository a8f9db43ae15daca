#include "runtime/tokenizer/SentencePieceTokenizer.h"

#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "runtime/tokenizer/PairMerger.h"

namespace kvjit::tokenizer {
namespace {

constexpr char kSpaceMarker[] = "\xE2\x96\x81";  // U+2581

}  // namespace

SentencePieceTokenizer::SentencePieceTokenizer(Vocabulary vocabulary)
    : Tokenizer(std::move(vocabulary)) {
  byte_token_ids_.fill(kNoToken);
}

absl::StatusOr<std::unique_ptr<Tokenizer>> SentencePieceTokenizer::Create(
    Vocabulary vocabulary) {
  std::unique_ptr<SentencePieceTokenizer> tokenizer(
      new SentencePieceTokenizer(std::move(vocabulary)));
  const Vocabulary& vocab = tokenizer->vocabulary();
  for (size_t id = 0; id < vocab.tokens.size(); ++id) {
    if (vocab.token_types[id] != TokenType::kByte) continue;
    std::optional<uint8_t> byte = ParseByteToken(vocab.tokens[id]);
    if (!byte.has_value()) {
      return absl::InvalidArgumentError(
          absl::StrCat("tokenizer: byte token ", id, " is \"", vocab.tokens[id],
                       "\", not of the form <0xXX>"));
    }
    if (tokenizer->byte_token_ids_[*byte] == kNoToken) {
      tokenizer->byte_token_ids_[*byte] = static_cast<int32_t>(id);
    }
  }
  return tokenizer;
}

int32_t SentencePieceTokenizer::FindMergeablePiece(
    std::string_view text) const {
  const int32_t id = FindToken(text);
  if (id == kNoToken) return kNoToken;
  const TokenType type = token_type(id);
  return type == TokenType::kNormal || type == TokenType::kUserDefined
             ? id
             : kNoToken;
}

float SentencePieceTokenizer::Score(int32_t id) const {
  return vocabulary().scores.empty() ? 0.0f : vocabulary().scores[id];
}

absl::Status SentencePieceTokenizer::AppendByteFallback(
    std::string_view character, std::vector<int32_t>* ids) const {
  bool has_byte_tokens = true;
  for (char byte : character) {
    has_byte_tokens =
        has_byte_tokens &&
        byte_token_ids_[static_cast<unsigned char>(byte)] != kNoToken;
  }
  if (has_byte_tokens) {
    for (char byte : character) {
      ids->push_back(byte_token_ids_[static_cast<unsigned char>(byte)]);
    }
    return absl::OkStatus();
  }
  if (vocabulary().unknown_id == kNoToken) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tokenizer: the vocabulary has no token for \"", std::string(character),
        "\", neither byte tokens nor an unknown token"));
  }
  ids->push_back(vocabulary().unknown_id);
  return absl::OkStatus();
}

absl::Status SentencePieceTokenizer::EncodePlainText(
    const PlainText& plain, std::vector<int32_t>* ids) const {
  std::string escaped =
      plain.follows_special && vocabulary().add_space_prefix ? " " : "";
  escaped += plain.text;
  escaped = absl::StrReplaceAll(escaped, {{" ", kSpaceMarker}});
  const auto piece_score = [this](std::string_view joined, std::string_view,
                                  std::string_view) -> std::optional<double> {
    const int32_t id = FindMergeablePiece(joined);
    if (id == kNoToken) return std::nullopt;
    return Score(id);
  };
  for (std::string_view piece : MergePairs(escaped, piece_score)) {
    if (const int32_t id = FindMergeablePiece(piece); id != kNoToken) {
      ids->push_back(id);
      continue;
    }
    if (absl::Status status = AppendByteFallback(piece, ids); !status.ok()) {
      return status;
    }
  }
  return absl::OkStatus();
}

std::string SentencePieceTokenizer::TokenToPiece(int32_t id) const {
  if (!IsValidId(id)) return "";
  const std::string& text = vocabulary().tokens[id];
  switch (token_type(id)) {
    case TokenType::kNormal:
    case TokenType::kUserDefined:
      return absl::StrReplaceAll(text, {{kSpaceMarker, " "}});
    case TokenType::kByte:
      return std::string(1, static_cast<char>(*ParseByteToken(text)));
    case TokenType::kUnknown:
    case TokenType::kControl:
    case TokenType::kUnused:
      return "";
  }
  return "";
}

}  // namespace kvjit::tokenizer
