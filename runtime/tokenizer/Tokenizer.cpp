#include "runtime/tokenizer/Tokenizer.h"

#include <string>
#include <utility>

#include "runtime/tokenizer/ByteLevelBpeTokenizer.h"
#include "runtime/tokenizer/CharacterBpeTokenizer.h"
#include "runtime/tokenizer/SentencePieceTokenizer.h"
#include "runtime/tokenizer/Utf8.h"

namespace kvjit::tokenizer {
namespace {

// Control tokens that end a turn in common chat templates; vocabularies often
// name only EOS, yet models stop with these.
constexpr std::string_view kEndOfTurnTexts[] = {
    "<|endoftext|>", "<|im_end|>",    "<|eot_id|>", "<|eom_id|>",
    "<|end|>",       "<end_of_turn>", "<EOT>",
};

}  // namespace

Tokenizer::Tokenizer(Vocabulary vocabulary)
    : vocabulary_(std::move(vocabulary)), special_token_splitter_(vocabulary_) {
  id_by_text_.reserve(vocabulary_.tokens.size());
  for (size_t id = 0; id < vocabulary_.tokens.size(); ++id) {
    id_by_text_.emplace(vocabulary_.tokens[id], static_cast<int32_t>(id));
  }
  for (int32_t id : {vocabulary_.eos_id, vocabulary_.end_of_turn_id}) {
    if (id != kNoToken) end_of_generation_ids_.insert(id);
  }
  for (std::string_view text : kEndOfTurnTexts) {
    const int32_t id = FindToken(text);
    if (id != kNoToken && (token_type(id) == TokenType::kControl ||
                           token_type(id) == TokenType::kUserDefined)) {
      end_of_generation_ids_.insert(id);
    }
  }
}

std::string_view Tokenizer::DecodedSpelling(int32_t id) const {
  if (auto spelled = normalized_spellings_.find(id);
      spelled != normalized_spellings_.end()) {
    return spelled->second;
  }
  return vocabulary_.tokens[id];
}

int32_t Tokenizer::FindToken(std::string_view text) const {
  auto it = id_by_text_.find(text);
  return it == id_by_text_.end() ? kNoToken : it->second;
}

absl::StatusOr<std::vector<int32_t>> Tokenizer::Encode(
    std::string_view text, bool add_special, bool parse_special) const {
  if (absl::Status status = CheckUtf8(text); !status.ok()) return status;
  std::vector<int32_t> ids;
  if (add_special && vocabulary_.add_bos_token) ids.push_back(bos_id());
  const bool prefix_once = vocabulary_.space_prefix_once && vocabulary_.add_space_prefix;
  std::string prefixed;
  if (prefix_once && !text.empty()) {
    prefixed = " ";
    prefixed += text;
    text = prefixed;
  }
  bool follows_special = !prefix_once;
  for (const TextFragment& fragment :
       special_token_splitter_.Split(text, parse_special)) {
    if (fragment.special_id != kNoToken) {
      ids.push_back(fragment.special_id);
      follows_special = !prefix_once;
      continue;
    }
    const PlainText plain{fragment.text, fragment.text.data() == text.data(),
                          follows_special, parse_special};
    if (absl::Status status = EncodeBetweenAddedTokens(plain, &ids);
        !status.ok()) {
      return status;
    }
    follows_special = false;
  }
  if (add_special && vocabulary_.add_eos_token) ids.push_back(eos_id());
  return ids;
}

absl::Status Tokenizer::BuildNormalizer() {
  absl::StatusOr<TextNormalizer> normalizer =
      TextNormalizer::Create(vocabulary_.normalizer);
  if (!normalizer.ok()) return normalizer.status();
  normalizer_.emplace(*std::move(normalizer));
  for (const AddedTokenOptions& options : vocabulary_.added_token_options) {
    if (!options.normalized || !IsValidId(options.id)) continue;
    absl::StatusOr<std::string> spelled =
        normalizer_->Normalize(vocabulary_.tokens[options.id]);
    if (!spelled.ok()) return spelled.status();
    normalized_spellings_[options.id] = *std::move(spelled);
  }
  normalized_token_splitter_.emplace(
      SpecialTokenSplitter::ForNormalizedTokens(vocabulary_, normalized_spellings_));
  return absl::OkStatus();
}

absl::Status Tokenizer::EncodeBetweenAddedTokens(
    const PlainText& plain, std::vector<int32_t>* ids) const {
  if (normalizer_->empty() && normalized_token_splitter_->empty()) {
    return EncodePlainText(plain, ids);
  }
  absl::StatusOr<std::string> normalized = normalizer_->Normalize(plain.text);
  if (!normalized.ok()) return normalized.status();
  for (const TextFragment& fragment :
       normalized_token_splitter_->Split(*normalized, plain.parse_special)) {
    if (fragment.special_id != kNoToken) {
      ids->push_back(fragment.special_id);
      continue;
    }
    const bool starts_text = fragment.text.data() == normalized->data();
    const PlainText part{fragment.text, plain.starts_input && starts_text,
                         plain.follows_special && starts_text,
                         plain.parse_special};
    if (absl::Status status = EncodePlainText(part, ids); !status.ok()) {
      return status;
    }
  }
  return absl::OkStatus();
}

std::string Tokenizer::Decode(absl::Span<const int32_t> ids) const {
  std::string text;
  const bool strip_space_prefix =
      vocabulary_.model == TokenizerModel::kSentencePiece &&
      vocabulary_.add_space_prefix;
  size_t first = 0;
  if (!ids.empty() && ids[0] == bos_id()) first = 1;
  for (size_t i = first; i < ids.size(); ++i) {
    std::string piece = TokenToPiece(ids[i]);
    if (i == first && strip_space_prefix && !piece.empty() && piece[0] == ' ') {
      piece.erase(0, 1);
    }
    text += piece;
  }
  return text;
}

absl::StatusOr<std::unique_ptr<Tokenizer>> CreateTokenizer(
    Vocabulary vocabulary) {
  if (absl::Status status = ValidateVocabulary(vocabulary); !status.ok()) {
    return status;
  }
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer =
      absl::InternalError("tokenizer: unknown tokenizer model");
  switch (vocabulary.model) {
    case TokenizerModel::kSentencePiece:
      tokenizer = SentencePieceTokenizer::Create(std::move(vocabulary));
      break;
    case TokenizerModel::kByteLevelBpe:
      tokenizer = ByteLevelBpeTokenizer::Create(std::move(vocabulary));
      break;
    case TokenizerModel::kCharacterBpe:
      tokenizer = CharacterBpeTokenizer::Create(std::move(vocabulary));
      break;
  }
  if (!tokenizer.ok()) return tokenizer.status();
  if (absl::Status status = (*tokenizer)->BuildNormalizer(); !status.ok()) {
    return status;
  }
  return tokenizer;
}

}  // namespace kvjit::tokenizer
