#ifndef KVJIT_RUNTIME_TOKENIZER_WORDSPLITTER_H
#define KVJIT_RUNTIME_TOKENIZER_WORDSPLITTER_H

#include <memory>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/tokenizer/Pcre2Regex.h"
#include "runtime/tokenizer/Vocabulary.h"

namespace kvjit::tokenizer {

// The regexes of `pre_tokenizer` in the order they cut text, spelled as
// Hugging Face tokenizer.json files write them.
std::vector<std::string_view> PreTokenizerPatterns(PreTokenizer pre_tokenizer);

// The regex GPT-2's ByteLevel pre-tokenizer step cuts with (use_regex).
std::string_view Gpt2Pattern();

// Cuts text into the words byte-level BPE merges within, with the split rules
// of a pre-tokenizer (Unicode-aware PCRE2). Each rule in turn cuts every
// piece the ones before it left, as Hugging Face's Split pre-tokenizer does.
class WordSplitter {
 public:
  // `pre_tokenizer`'s regexes, each isolating its matches.
  static absl::StatusOr<std::unique_ptr<WordSplitter>> Create(
      PreTokenizer pre_tokenizer);
  static absl::StatusOr<std::unique_ptr<WordSplitter>> Create(
      const std::vector<SplitRule>& rules);

  // `text` must be valid UTF-8. The views point into `text`.
  absl::StatusOr<std::vector<std::string_view>> Split(
      std::string_view text) const;

 private:
  struct CompiledRule {
    Pcre2Regex regex;
    SplitBehavior behavior;
    bool invert;
  };

  explicit WordSplitter(std::vector<CompiledRule> rules);

  absl::Status SplitPiece(const CompiledRule& rule, std::string_view piece,
                          pcre2_match_data* match_data,
                          std::vector<std::string_view>* pieces) const;

  std::vector<CompiledRule> rules_;
};

}  // namespace kvjit::tokenizer

#endif  // KVJIT_RUNTIME_TOKENIZER_WORDSPLITTER_H
