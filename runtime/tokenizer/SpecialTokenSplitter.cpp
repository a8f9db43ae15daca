#include "runtime/tokenizer/SpecialTokenSplitter.h"

#include <algorithm>

#include <unicode/uchar.h>
#include <unicode/utf8.h>

#include "absl/container/flat_hash_map.h"
#include "runtime/tokenizer/Utf8.h"

namespace kvjit::tokenizer {
namespace {

// A character of Rust's Unicode \w, which tokenizers' single_word tests.
bool IsWordCharacter(UChar32 c) {
  return u_hasBinaryProperty(c, UCHAR_ALPHABETIC) ||
         (U_GET_GC_MASK(c) & (U_GC_M_MASK | U_GC_ND_MASK | U_GC_PC_MASK)) !=
             0 ||
         u_hasBinaryProperty(c, UCHAR_JOIN_CONTROL);
}

const uint8_t* Bytes(std::string_view text) {
  return reinterpret_cast<const uint8_t*>(text.data());
}

bool EndsWithWordCharacter(std::string_view text) {
  if (text.empty()) return false;
  int32_t end = static_cast<int32_t>(text.size());
  UChar32 c;
  U8_PREV(Bytes(text), 0, end, c);
  return c >= 0 && IsWordCharacter(c);
}

bool StartsWithWordCharacter(std::string_view text) {
  if (text.empty()) return false;
  int32_t start = 0;
  UChar32 c;
  U8_NEXT(Bytes(text), start, static_cast<int32_t>(text.size()), c);
  return c >= 0 && IsWordCharacter(c);
}

}  // namespace

SpecialTokenSplitter::SpecialTokenSplitter(const Vocabulary& vocabulary) {
  AddCandidates(vocabulary, /*normalized=*/false, {});
}

SpecialTokenSplitter SpecialTokenSplitter::ForNormalizedTokens(
    const Vocabulary& vocabulary,
    const absl::flat_hash_map<int32_t, std::string>& spelling_by_id) {
  SpecialTokenSplitter splitter;
  splitter.AddCandidates(vocabulary, /*normalized=*/true, spelling_by_id);
  return splitter;
}

void SpecialTokenSplitter::AddCandidates(
    const Vocabulary& vocabulary, bool normalized,
    const absl::flat_hash_map<int32_t, std::string>& spelling_by_id) {
  absl::flat_hash_map<int32_t, AddedTokenOptions> options_by_id;
  for (const AddedTokenOptions& options : vocabulary.added_token_options) {
    options_by_id[options.id] = options;
  }
  for (size_t id = 0; id < vocabulary.tokens.size(); ++id) {
    const std::string& token = vocabulary.tokens[id];
    const TokenType type = vocabulary.token_types[id];
    if (token.empty()) continue;
    if (type != TokenType::kUserDefined && type != TokenType::kControl &&
        type != TokenType::kUnknown) {
      continue;
    }
    AddedTokenOptions options;
    options.id = static_cast<int32_t>(id);
    if (auto found = options_by_id.find(options.id);
        found != options_by_id.end()) {
      options = found->second;
    }
    if (options.normalized != normalized) continue;
    std::string_view text = token;
    if (auto spelled = spelling_by_id.find(options.id);
        spelled != spelling_by_id.end() && spelled->second != token) {
      text = spellings_.emplace_back(spelled->second);
    }
    if (text.empty()) continue;
    candidates_.push_back({text, static_cast<int32_t>(id),
                           type != TokenType::kUserDefined, options});
    Insert(static_cast<int32_t>(candidates_.size() - 1));
  }
}

void SpecialTokenSplitter::Insert(int32_t candidate_index) {
  const Candidate& candidate = candidates_[candidate_index];
  int32_t node = 0;
  for (char byte : candidate.text) {
    auto [edge, added] = edges_.try_emplace(
        EdgeKey(node, static_cast<unsigned char>(byte)),
        static_cast<int32_t>(nodes_.size()));
    if (added) nodes_.emplace_back();
    node = edge->second;
  }
  // Candidates arrive by id, so the first of a text keeps its place.
  TrieNode& end = nodes_[node];
  if (end.any_candidate < 0) end.any_candidate = candidate_index;
  if (end.plain_candidate < 0 && !candidate.needs_parse_special) {
    end.plain_candidate = candidate_index;
  }
}

std::vector<TextFragment> SpecialTokenSplitter::Split(
    std::string_view text, bool parse_special) const {
  std::vector<TextFragment> fragments;
  size_t plain_start = 0;
  size_t position = 0;
  while (position < text.size()) {
    // The longest candidate that starts here.
    const Candidate* match = nullptr;
    int32_t node = 0;
    for (size_t at = position; at < text.size(); ++at) {
      auto edge = edges_.find(EdgeKey(node, static_cast<unsigned char>(text[at])));
      if (edge == edges_.end()) break;
      node = edge->second;
      const int32_t found = parse_special ? nodes_[node].any_candidate
                                          : nodes_[node].plain_candidate;
      if (found >= 0) match = &candidates_[found];
    }
    if (match == nullptr) {
      ++position;
      continue;
    }
    size_t start = position;
    size_t stop = position + match->text.size();
    // Like tokenizers, a match passed over is not searched again for a
    // shorter token inside it.
    position = stop;
    if (match->options.single_word &&
        (EndsWithWordCharacter(text.substr(0, start)) ||
         StartsWithWordCharacter(text.substr(stop)))) {
      continue;
    }
    if (match->options.lstrip) {
      start = std::max(TrailingWhitespaceStart(text.substr(0, start)),
                       plain_start);
    }
    if (match->options.rstrip) {
      stop += LeadingWhitespaceLength(text.substr(stop));
    }
    if (start > plain_start) {
      fragments.push_back({text.substr(plain_start, start - plain_start)});
    }
    fragments.push_back({text.substr(start, stop - start), match->id});
    position = stop;
    plain_start = stop;
  }
  if (plain_start < text.size())
    fragments.push_back({text.substr(plain_start)});
  return fragments;
}

}  // namespace kvjit::tokenizer
