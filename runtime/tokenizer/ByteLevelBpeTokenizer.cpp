#include "runtime/tokenizer/ByteLevelBpeTokenizer.h"

#include <optional>

#include "absl/strings/str_cat.h"
#include "runtime/tokenizer/PairMerger.h"
#include "runtime/tokenizer/Utf8.h"

namespace kvjit::tokenizer {

ByteLevelBpeTokenizer::ByteLevelBpeTokenizer(Vocabulary vocabulary)
    : Tokenizer(std::move(vocabulary)) {}

absl::StatusOr<std::unique_ptr<Tokenizer>> ByteLevelBpeTokenizer::Create(
    Vocabulary vocabulary) {
  std::unique_ptr<ByteLevelBpeTokenizer> tokenizer(
      new ByteLevelBpeTokenizer(std::move(vocabulary)));
  const Vocabulary& vocab = tokenizer->vocabulary();
  absl::StatusOr<std::unique_ptr<WordSplitter>> splitter =
      vocab.split_rules.has_value() ? WordSplitter::Create(*vocab.split_rules)
                                    : WordSplitter::Create(vocab.pre_tokenizer);
  if (!splitter.ok()) return splitter.status();
  tokenizer->word_splitter_ = std::move(*splitter);
  tokenizer->merge_ranks_.reserve(vocab.merges.size());
  for (size_t rank = 0; rank < vocab.merges.size(); ++rank) {
    const auto& [left, right] = vocab.merges[rank];
    tokenizer->merge_ranks_.emplace(
        std::pair<std::string_view, std::string_view>(left, right),
        static_cast<int32_t>(rank));
  }
  return tokenizer;
}

int32_t ByteLevelBpeTokenizer::MergeRank(std::string_view left,
                                         std::string_view right) const {
  auto it = merge_ranks_.find(std::make_pair(left, right));
  return it == merge_ranks_.end() ? -1 : it->second;
}

absl::Status ByteLevelBpeTokenizer::EncodePlainText(
    const PlainText& plain, std::vector<int32_t>* ids) const {
  absl::StatusOr<std::vector<std::string_view>> words =
      word_splitter_->Split(plain.text);
  if (!words.ok()) return words.status();
  for (std::string_view word : *words) {
    if (absl::Status status = EncodeWord(alphabet_.Encode(word), ids);
        !status.ok()) {
      return status;
    }
  }
  return absl::OkStatus();
}

absl::Status ByteLevelBpeTokenizer::EncodeWord(
    std::string_view word, std::vector<int32_t>* ids) const {
  if (vocabulary().ignore_merges) {
    if (const int32_t id = FindToken(word); id != kNoToken) {
      ids->push_back(id);
      return absl::OkStatus();
    }
  }
  const auto merge_priority =
      [this](std::string_view, std::string_view left,
             std::string_view right) -> std::optional<double> {
    const int32_t rank = MergeRank(left, right);
    if (rank < 0) return std::nullopt;
    return -static_cast<double>(rank);
  };
  for (std::string_view piece : MergePairs(word, merge_priority)) {
    if (const int32_t id = FindToken(piece); id != kNoToken) {
      ids->push_back(id);
      continue;
    }
    // Only a vocabulary whose merges build tokens it lacks gets here; fall
    // back to the tokens of the piece's characters.
    for (size_t start = 0; start < piece.size();) {
      const size_t length = CharacterLengthAt(piece, start);
      int32_t id = FindToken(piece.substr(start, length));
      if (id == kNoToken) id = vocabulary().unknown_id;
      if (id == kNoToken) {
        return absl::InvalidArgumentError(
            absl::StrCat("tokenizer: the vocabulary has no token for \"",
                         std::string(piece.substr(start, length)),
                         "\" and no unknown token"));
      }
      ids->push_back(id);
      start += length;
    }
  }
  return absl::OkStatus();
}

std::string ByteLevelBpeTokenizer::TokenToPiece(int32_t id) const {
  if (!IsValidId(id)) return "";
  const std::string& text = vocabulary().tokens[id];
  switch (token_type(id)) {
    case TokenType::kNormal:
      return alphabet_.Decode(text);
    case TokenType::kUserDefined:
      return text;
    case TokenType::kUnknown:
    case TokenType::kControl:
    case TokenType::kUnused:
    case TokenType::kByte:
      return "";
  }
  return "";
}

}  // namespace kvjit::tokenizer
