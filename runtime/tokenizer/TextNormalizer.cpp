#include "runtime/tokenizer/TextNormalizer.h"

#include <utility>

#include <unicode/locid.h>
#include <unicode/normalizer2.h>
#include <unicode/stringpiece.h>
#include <unicode/unistr.h>
#include <unicode/utypes.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace kvjit::tokenizer {
namespace {

absl::StatusOr<const icu::Normalizer2*> NormalizerOf(Normalization form) {
  UErrorCode error = U_ZERO_ERROR;
  const icu::Normalizer2* normalizer = nullptr;
  switch (form) {
    case Normalization::kNfc:
      normalizer = icu::Normalizer2::getNFCInstance(error);
      break;
    case Normalization::kNfd:
      normalizer = icu::Normalizer2::getNFDInstance(error);
      break;
    case Normalization::kNfkc:
      normalizer = icu::Normalizer2::getNFKCInstance(error);
      break;
    case Normalization::kNfkd:
      normalizer = icu::Normalizer2::getNFKDInstance(error);
      break;
    case Normalization::kLowercase:
      // Not a normalization form: Normalize lowercases without one.
      break;
  }
  if (U_FAILURE(error) || normalizer == nullptr) {
    return absl::InternalError(absl::StrCat(
        "tokenizer: ICU has no Unicode normalizer: ", u_errorName(error)));
  }
  return normalizer;
}

}  // namespace

TextNormalizer::TextNormalizer(std::vector<Normalization> steps)
    : steps_(std::move(steps)) {}

absl::StatusOr<std::string> TextNormalizer::Normalize(
    std::string_view text) const {
  icu::UnicodeString unicode = icu::UnicodeString::fromUTF8(
      icu::StringPiece(text.data(), static_cast<int32_t>(text.size())));
  for (Normalization step : steps_) {
    if (step == Normalization::kLowercase) {
      // The root locale lowercases as Rust's str::to_lowercase, which
      // Hugging Face's Lowercase uses: full mappings, no language rules.
      unicode.toLower(icu::Locale::getRoot());
      continue;
    }
    absl::StatusOr<const icu::Normalizer2*> normalizer = NormalizerOf(step);
    if (!normalizer.ok()) return normalizer.status();
    UErrorCode error = U_ZERO_ERROR;
    unicode = (*normalizer)->normalize(unicode, error);
    if (U_FAILURE(error)) {
      return absl::InternalError(absl::StrCat(
          "tokenizer: Unicode normalization failed: ", u_errorName(error)));
    }
  }
  std::string normalized;
  unicode.toUTF8String(normalized);
  return normalized;
}

}  // namespace kvjit::tokenizer
