#ifndef KVJIT_RUNTIME_TOKENIZER_TEXTNORMALIZER_H
#define KVJIT_RUNTIME_TOKENIZER_TEXTNORMALIZER_H

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/tokenizer/Vocabulary.h"

namespace kvjit::tokenizer {

// Applies a tokenizer.json's normalizers (Unicode normalization forms and
// lowercasing, through ICU) to text before it is cut into words.
class TextNormalizer {
 public:
  explicit TextNormalizer(std::vector<Normalization> steps);

  bool empty() const { return steps_.empty(); }

  // `text` must be valid UTF-8; so is the result.
  absl::StatusOr<std::string> Normalize(std::string_view text) const;

 private:
  std::vector<Normalization> steps_;
};

}  // namespace kvjit::tokenizer

#endif  // KVJIT_RUNTIME_TOKENIZER_TEXTNORMALIZER_H
