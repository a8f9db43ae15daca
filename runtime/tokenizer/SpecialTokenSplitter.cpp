#include "runtime/tokenizer/SpecialTokenSplitter.h"

#include <algorithm>

namespace kvjit::tokenizer {

SpecialTokenSplitter::SpecialTokenSplitter(const Vocabulary& vocabulary) {
  for (size_t id = 0; id < vocabulary.tokens.size(); ++id) {
    const std::string& text = vocabulary.tokens[id];
    const TokenType type = vocabulary.token_types[id];
    if (text.empty()) continue;
    if (type != TokenType::kUserDefined && type != TokenType::kControl &&
        type != TokenType::kUnknown) {
      continue;
    }
    candidates_by_first_byte_[static_cast<unsigned char>(text[0])].push_back(
        {text, static_cast<int32_t>(id), type != TokenType::kUserDefined});
  }
  for (auto& candidates : candidates_by_first_byte_) {
    std::stable_sort(candidates.begin(), candidates.end(),
                     [](const Candidate& a, const Candidate& b) {
                       return a.text.size() > b.text.size();
                     });
  }
}

std::vector<TextFragment> SpecialTokenSplitter::Split(
    std::string_view text, bool parse_special) const {
  std::vector<TextFragment> fragments;
  size_t plain_start = 0;
  size_t position = 0;
  while (position < text.size()) {
    const Candidate* match = nullptr;
    for (const Candidate& candidate :
         candidates_by_first_byte_[static_cast<unsigned char>(
             text[position])]) {
      if (candidate.needs_parse_special && !parse_special) continue;
      if (text.compare(position, candidate.text.size(), candidate.text) == 0) {
        match = &candidate;
        break;
      }
    }
    if (match == nullptr) {
      ++position;
      continue;
    }
    if (position > plain_start) {
      fragments.push_back({text.substr(plain_start, position - plain_start)});
    }
    fragments.push_back({match->text, match->id});
    position += match->text.size();
    plain_start = position;
  }
  if (plain_start < text.size())
    fragments.push_back({text.substr(plain_start)});
  return fragments;
}

}  // namespace kvjit::tokenizer
