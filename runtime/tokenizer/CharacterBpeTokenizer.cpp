#include "runtime/tokenizer/CharacterBpeTokenizer.h"

#include <cstdio>
#include <queue>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "runtime/tokenizer/Utf8.h"

namespace kvjit::tokenizer {
namespace {

// A pair of neighbouring symbols that may merge; the queue yields the best
// rank first, then the leftmost.
struct Candidate {
  int32_t rank;
  size_t position;
  int32_t merged_id;
  bool operator<(const Candidate& other) const {
    if (rank != other.rank) return rank > other.rank;
    return position > other.position;
  }
};

struct Symbol {
  int32_t id;
  // Neighbours in the word; -1 at its ends.
  int64_t previous;
  int64_t next;
  bool merged_away;
};

}  // namespace

CharacterBpeTokenizer::CharacterBpeTokenizer(Vocabulary vocabulary)
    : Tokenizer(std::move(vocabulary)),
      decoder_(this->vocabulary().decoder) {
  byte_token_ids_.fill(kNoToken);
}

absl::StatusOr<std::unique_ptr<Tokenizer>> CharacterBpeTokenizer::Create(
    Vocabulary vocabulary) {
  std::unique_ptr<CharacterBpeTokenizer> tokenizer(
      new CharacterBpeTokenizer(std::move(vocabulary)));
  const Vocabulary& vocab = tokenizer->vocabulary();
  if (vocab.split_rules.has_value() && !vocab.split_rules->empty()) {
    absl::StatusOr<std::unique_ptr<WordSplitter>> splitter =
        WordSplitter::Create(*vocab.split_rules);
    if (!splitter.ok()) return splitter.status();
    tokenizer->word_splitter_ = *std::move(splitter);
  }
  for (int byte = 0; byte < 256; ++byte) {
    char text[8];
    std::snprintf(text, sizeof(text), "<0x%02X>", byte);
    tokenizer->byte_token_ids_[byte] = tokenizer->FindToken(text);
  }
  tokenizer->merges_.reserve(vocab.merges.size());
  for (size_t rank = 0; rank < vocab.merges.size(); ++rank) {
    const auto& [left, right] = vocab.merges[rank];
    const int32_t left_id = tokenizer->FindToken(left);
    const int32_t right_id = tokenizer->FindToken(right);
    const int32_t merged_id = tokenizer->FindToken(absl::StrCat(left, right));
    if (left_id == kNoToken || right_id == kNoToken || merged_id == kNoToken) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tokenizer: merge ", rank, " (\"", left, " ", right,
          "\") names a piece that is not a token"));
    }
    // A pair listed twice keeps its first (best) rank, as tokenizers does.
    tokenizer->merges_.try_emplace(std::make_pair(left_id, right_id),
                                   Merge{static_cast<int32_t>(rank), merged_id});
  }
  return tokenizer;
}

std::vector<std::string> CharacterBpeTokenizer::ApplyMetaspace(
    std::string_view piece, bool starts_input) const {
  const Metaspace& metaspace = *vocabulary().metaspace;
  std::string replaced =
      absl::StrReplaceAll(std::string(piece), {{" ", metaspace.replacement}});
  const bool prepend =
      metaspace.prepend_scheme == PrependScheme::kAlways ||
      (metaspace.prepend_scheme == PrependScheme::kFirst && starts_input);
  if (prepend && replaced.compare(0, metaspace.replacement.size(),
                                  metaspace.replacement) != 0) {
    replaced.insert(0, metaspace.replacement);
  }
  if (!metaspace.split) return {std::move(replaced)};
  // Each replacement starts a word (tokenizers' MergedWithNext).
  std::vector<std::string> words;
  size_t start = 0;
  for (size_t at = replaced.find(metaspace.replacement, 1);
       at != std::string::npos;
       at = replaced.find(metaspace.replacement, at + 1)) {
    words.push_back(replaced.substr(start, at - start));
    start = at;
  }
  if (start < replaced.size()) words.push_back(replaced.substr(start));
  return words;
}

absl::Status CharacterBpeTokenizer::EncodePlainText(
    const PlainText& plain, std::vector<int32_t>* ids) const {
  std::vector<std::string_view> pieces{plain.text};
  if (word_splitter_ != nullptr) {
    absl::StatusOr<std::vector<std::string_view>> split =
        word_splitter_->Split(plain.text);
    if (!split.ok()) return split.status();
    pieces = *std::move(split);
  }
  for (std::string_view piece : pieces) {
    if (!vocabulary().metaspace.has_value()) {
      if (absl::Status status = EncodeWord(piece, ids); !status.ok()) {
        return status;
      }
      continue;
    }
    const bool starts_input =
        plain.starts_input && piece.data() == plain.text.data();
    for (const std::string& word : ApplyMetaspace(piece, starts_input)) {
      if (absl::Status status = EncodeWord(word, ids); !status.ok()) {
        return status;
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int32_t>> CharacterBpeTokenizer::InitialSymbols(
    std::string_view word) const {
  std::vector<int32_t> symbols;
  bool unknown_pending = false;
  const auto flush_unknown = [&] {
    if (unknown_pending) symbols.push_back(vocabulary().unknown_id);
    unknown_pending = false;
  };
  for (size_t start = 0; start < word.size();) {
    const std::string_view character = word.substr(start, CharacterLengthAt(word, start));
    start += character.size();
    if (const int32_t id = FindToken(character); id != kNoToken) {
      flush_unknown();
      symbols.push_back(id);
      continue;
    }
    if (vocabulary().byte_fallback) {
      bool all_bytes = true;
      for (char byte : character) {
        all_bytes = all_bytes &&
                    byte_token_ids_[static_cast<unsigned char>(byte)] != kNoToken;
      }
      if (all_bytes) {
        // Like tokenizers, byte tokens leave a pending unknown token pending.
        for (char byte : character) {
          symbols.push_back(byte_token_ids_[static_cast<unsigned char>(byte)]);
        }
        continue;
      }
    }
    if (vocabulary().unknown_id == kNoToken) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tokenizer: the vocabulary has no token for \"", std::string(character),
          "\", neither byte tokens nor an unknown token"));
    }
    if (!vocabulary().fuse_unk) flush_unknown();
    unknown_pending = true;
  }
  flush_unknown();
  return symbols;
}

absl::Status CharacterBpeTokenizer::EncodeWord(
    std::string_view word, std::vector<int32_t>* ids) const {
  if (word.empty()) return absl::OkStatus();
  if (vocabulary().ignore_merges) {
    if (const int32_t id = FindToken(word); id != kNoToken) {
      ids->push_back(id);
      return absl::OkStatus();
    }
  }
  absl::StatusOr<std::vector<int32_t>> initial = InitialSymbols(word);
  if (!initial.ok()) return initial.status();
  std::vector<Symbol> symbols;
  symbols.reserve(initial->size());
  for (size_t i = 0; i < initial->size(); ++i) {
    symbols.push_back({(*initial)[i], static_cast<int64_t>(i) - 1,
                       i + 1 < initial->size() ? static_cast<int64_t>(i + 1) : -1,
                       false});
  }
  std::priority_queue<Candidate> queue;
  const auto consider = [&](size_t position) {
    const Symbol& left = symbols[position];
    if (left.next < 0) return;
    auto merge = merges_.find(std::make_pair(left.id, symbols[left.next].id));
    if (merge == merges_.end()) return;
    queue.push({merge->second.rank, position, merge->second.merged_id});
  };
  for (size_t i = 0; i + 1 < symbols.size(); ++i) consider(i);
  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    Symbol& left = symbols[top.position];
    if (left.merged_away || left.next < 0) continue;
    // The pair may have changed since it was queued.
    auto merge = merges_.find(std::make_pair(left.id, symbols[left.next].id));
    if (merge == merges_.end() || merge->second.merged_id != top.merged_id) {
      continue;
    }
    Symbol& right = symbols[left.next];
    left.id = top.merged_id;
    right.merged_away = true;
    left.next = right.next;
    if (left.next >= 0) symbols[left.next].previous = top.position;
    if (left.previous >= 0) consider(static_cast<size_t>(left.previous));
    consider(top.position);
  }
  for (const Symbol& symbol : symbols) {
    if (!symbol.merged_away) ids->push_back(symbol.id);
  }
  return absl::OkStatus();
}

bool CharacterBpeTokenizer::IsDecoded(int32_t id) const {
  if (!IsValidId(id)) return false;
  const TokenType type = token_type(id);
  return type != TokenType::kControl && type != TokenType::kUnknown &&
         type != TokenType::kUnused;
}

std::string CharacterBpeTokenizer::Decode(
    absl::Span<const int32_t> ids) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int32_t id : ids) {
    if (IsDecoded(id)) tokens.emplace_back(DecodedSpelling(id));
  }
  return decoder_.Decode(std::move(tokens));
}

std::string CharacterBpeTokenizer::TokenToPiece(int32_t id) const {
  if (!IsDecoded(id)) return "";
  return decoder_.DecodeContinuation(std::string(DecodedSpelling(id)));
}

}  // namespace kvjit::tokenizer
