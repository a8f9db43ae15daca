#ifndef KVJIT_RUNTIME_TOKENIZER_TEXTNORMALIZER_H
#define KVJIT_RUNTIME_TOKENIZER_TEXTNORMALIZER_H

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/tokenizer/Pcre2Regex.h"
#include "runtime/tokenizer/Vocabulary.h"

namespace kvjit::tokenizer {

// Applies a tokenizer.json's normalizer steps, in order, to text before it is
// cut into words: Unicode normalization forms and lowercasing through ICU,
// Prepend, Replace (literal or PCRE2 regex) and Strip as Hugging Face's
// tokenizers library does them.
class TextNormalizer {
 public:
  // Fails on a Replace regex PCRE2 cannot compile.
  static absl::StatusOr<TextNormalizer> Create(
      std::vector<NormalizerStep> steps);

  bool empty() const { return steps_.empty(); }

  // `text` must be valid UTF-8; so is the result.
  absl::StatusOr<std::string> Normalize(std::string_view text) const;

 private:
  struct Step {
    NormalizerStep spec;
    // kReplace with a regex only.
    Pcre2Regex regex;
  };

  explicit TextNormalizer(std::vector<Step> steps)
      : steps_(std::move(steps)) {}

  absl::StatusOr<std::string> ReplaceMatches(const Step& step,
                                             std::string_view text) const;

  std::vector<Step> steps_;
};

}  // namespace kvjit::tokenizer

#endif  // KVJIT_RUNTIME_TOKENIZER_TEXTNORMALIZER_H
