#ifndef KVJIT_RUNTIME_TOKENIZER_SPECIALTOKENSPLITTER_H
#define KVJIT_RUNTIME_TOKENIZER_SPECIALTOKENSPLITTER_H

#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
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
// tokens only when the caller trusts the input to contain them. A token's
// AddedTokenOptions apply as Hugging Face's tokenizers applies them: lstrip
// and rstrip take the whitespace beside it into its fragment, single_word
// passes over a match that a word character touches.
class SpecialTokenSplitter {
 public:
  // Finds the tokens that are looked for in the text as given: those whose
  // AddedTokenOptions::normalized is false (or that have no options).
  explicit SpecialTokenSplitter(const Vocabulary& vocabulary);

  // Finds the tokens that are looked for in normalized text, spelled as
  // `spelling_by_id` says, the normalizer's rewriting of each (a normalizer
  // that prepends U+2581 looks for "hello" as "\u2581hello").
  static SpecialTokenSplitter ForNormalizedTokens(
      const Vocabulary& vocabulary,
      const absl::flat_hash_map<int32_t, std::string>& spelling_by_id);

  bool empty() const { return candidates_.empty(); }

  // Scans left to right, taking the longest special token starting at each
  // position. Views point into `text` and the vocabulary.
  std::vector<TextFragment> Split(std::string_view text,
                                  bool parse_special) const;

 private:
  SpecialTokenSplitter() = default;
  // Adds the added tokens whose AddedTokenOptions::normalized equals
  // `normalized`, spelled as `spelling_by_id` gives them where it has them.
  void AddCandidates(const Vocabulary& vocabulary, bool normalized,
                     const absl::flat_hash_map<int32_t, std::string>& spelling_by_id);

  struct Candidate {
    std::string_view text;
    int32_t id;
    bool needs_parse_special;
    AddedTokenOptions options;
  };
  // A byte trie of the candidates' texts, so that finding the longest token
  // at a position costs that token's length, however many tokens share its
  // first bytes (Gemma has thousands of "<unused...>"). A node ending a text
  // names the candidate found there: the lowest id among those of that
  // text, and among those found without parse_special.
  struct TrieNode {
    int32_t any_candidate = -1;
    int32_t plain_candidate = -1;
  };
  static uint64_t EdgeKey(int32_t node, unsigned char byte) {
    return (static_cast<uint64_t>(node) << 8) | byte;
  }
  void Insert(int32_t candidate_index);

  std::vector<Candidate> candidates_;
  std::vector<TrieNode> nodes_{TrieNode()};
  absl::flat_hash_map<uint64_t, int32_t> edges_;
  // Spellings that are not the vocabulary's own; a deque keeps them in place.
  std::deque<std::string> spellings_;
};

}  // namespace kvjit::tokenizer

#endif  // KVJIT_RUNTIME_TOKENIZER_SPECIALTOKENSPLITTER_H
