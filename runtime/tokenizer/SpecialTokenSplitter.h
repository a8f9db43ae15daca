#ifndef KVJIT_RUNTIME_TOKENIZER_SPECIALTOKENSPLITTER_H
#define KVJIT_RUNTIME_TOKENIZER_SPECIALTOKENSPLITTER_H

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "runtime/tokenizer/Vocabulary.h"

namespace kvjit::tokenizer {

// A stretch of input: a special token's text, or plain text between them.
struct TextFragment {
  std::string_view text;
  // The special token `text` spells, or kNoToken for plain text.
  int32_t special_id = kNoToken;
};

// Finds the text of special tokens in input so that it becomes that token
// rather than being tokenized piece by piece. User-defined tokens are always
// found (they are literal additions to the vocabulary); control and unknown
// tokens only when the caller trusts the input to contain them.
class SpecialTokenSplitter {
 public:
  explicit SpecialTokenSplitter(const Vocabulary& vocabulary);

  // Scans left to right, taking the longest special token starting at each
  // position. Views point into `text` and the vocabulary.
  std::vector<TextFragment> Split(std::string_view text,
                                  bool parse_special) const;

 private:
  struct Candidate {
    std::string_view text;
    int32_t id;
    bool needs_parse_special;
  };
  // Candidates by their first byte, longest first.
  std::array<std::vector<Candidate>, 256> candidates_by_first_byte_;
};

}  // namespace kvjit::tokenizer

#endif  // KVJIT_RUNTIME_TOKENIZER_SPECIALTOKENSPLITTER_H
