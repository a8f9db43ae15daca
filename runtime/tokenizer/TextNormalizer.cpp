#include "runtime/tokenizer/TextNormalizer.h"

#include <algorithm>
#include <utility>

#include <unicode/locid.h>
#include <unicode/normalizer2.h>
#include <unicode/uniset.h>
#include <unicode/stringpiece.h>
#include <unicode/unistr.h>
#include <unicode/utypes.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "runtime/tokenizer/Utf8.h"

namespace kvjit::tokenizer {
namespace {

absl::StatusOr<const icu::Normalizer2*> NormalizerOf(NormalizerKind form) {
  UErrorCode error = U_ZERO_ERROR;
  const icu::Normalizer2* normalizer = nullptr;
  switch (form) {
    case NormalizerKind::kNfc:
      normalizer = icu::Normalizer2::getNFCInstance(error);
      break;
    case NormalizerKind::kNfd:
      normalizer = icu::Normalizer2::getNFDInstance(error);
      break;
    case NormalizerKind::kNfkc:
      normalizer = icu::Normalizer2::getNFKCInstance(error);
      break;
    case NormalizerKind::kNfkd:
      normalizer = icu::Normalizer2::getNFKDInstance(error);
      break;
    default:
      break;
  }
  if (U_FAILURE(error) || normalizer == nullptr) {
    return absl::InternalError(absl::StrCat(
        "tokenizer: ICU has no Unicode normalizer: ", u_errorName(error)));
  }
  return normalizer;
}

// Hugging Face's tokenizers normalizes with tables of Unicode 9.0: a
// character assigned later is neither decomposed nor reordered there, so it
// is left alone here too.
const icu::UnicodeSet& UnicodeNineCharacters() {
  static const icu::UnicodeSet* const characters = [] {
    UErrorCode error = U_ZERO_ERROR;
    auto* set = new icu::UnicodeSet(icu::UnicodeString(u"[:age=9.0:]"), error);
    set->freeze();
    return set;
  }();
  return *characters;
}

absl::StatusOr<std::string> NormalizeForm(NormalizerKind form,
                                          std::string_view text) {
  icu::UnicodeString unicode = icu::UnicodeString::fromUTF8(
      icu::StringPiece(text.data(), static_cast<int32_t>(text.size())));
  if (form == NormalizerKind::kLowercase) {
    // The root locale lowercases as Rust's str::to_lowercase, which Hugging
    // Face's Lowercase uses: full mappings, no language rules.
    unicode.toLower(icu::Locale::getRoot());
  } else {
    absl::StatusOr<const icu::Normalizer2*> normalizer = NormalizerOf(form);
    if (!normalizer.ok()) return normalizer.status();
    const icu::FilteredNormalizer2 filtered(**normalizer, UnicodeNineCharacters());
    UErrorCode error = U_ZERO_ERROR;
    icu::UnicodeString normalized;
    filtered.normalize(unicode, normalized, error);
    unicode = std::move(normalized);
    if (U_FAILURE(error)) {
      return absl::InternalError(absl::StrCat(
          "tokenizer: Unicode normalization failed: ", u_errorName(error)));
    }
  }
  std::string normalized;
  unicode.toUTF8String(normalized);
  return normalized;
}

}  // namespace

absl::StatusOr<TextNormalizer> TextNormalizer::Create(
    std::vector<NormalizerStep> specs) {
  std::vector<Step> steps;
  steps.reserve(specs.size());
  for (NormalizerStep& spec : specs) {
    Step step{std::move(spec), nullptr};
    if (step.spec.kind == NormalizerKind::kReplace &&
        step.spec.pattern_is_regex) {
      absl::StatusOr<Pcre2Regex> regex = CompilePcre2(
          step.spec.pattern, PCRE2_UTF | PCRE2_UCP,
          absl::StrCat("the Replace normalizer's regex '", step.spec.pattern, "'"));
      if (!regex.ok()) return regex.status();
      step.regex = *std::move(regex);
    }
    steps.push_back(std::move(step));
  }
  return TextNormalizer(std::move(steps));
}

absl::StatusOr<std::string> TextNormalizer::ReplaceMatches(
    const Step& step, std::string_view text) const {
  Pcre2MatchData match_data(
      pcre2_match_data_create_from_pattern(step.regex.get(), nullptr));
  std::string replaced;
  size_t copied = 0;
  size_t position = 0;
  while (position <= text.size()) {
    const int result = pcre2_match(
        step.regex.get(), reinterpret_cast<PCRE2_SPTR>(text.data()),
        text.size(), position, PCRE2_NO_UTF_CHECK, match_data.get(), nullptr);
    if (result == PCRE2_ERROR_NOMATCH) break;
    if (result < 0) {
      return absl::InternalError(
          absl::StrCat("tokenizer: the Replace normalizer's regex failed: ",
                       Pcre2ErrorMessage(result)));
    }
    const PCRE2_SIZE* bounds = pcre2_get_ovector_pointer(match_data.get());
    replaced.append(text.substr(copied, bounds[0] - copied));
    replaced += step.spec.content;
    copied = bounds[1];
    // An empty match moves on by a character, as Rust's regex iterators do.
    position = bounds[1] > bounds[0]
                   ? bounds[1]
                   : bounds[1] + (bounds[1] < text.size() ? CharacterLengthAt(text, bounds[1]) : 1);
  }
  replaced.append(text.substr(copied));
  return replaced;
}

absl::StatusOr<std::string> TextNormalizer::Normalize(
    std::string_view text) const {
  std::string normalized(text);
  for (const Step& step : steps_) {
    switch (step.spec.kind) {
      case NormalizerKind::kPrepend:
        if (!normalized.empty()) normalized.insert(0, step.spec.content);
        break;
      case NormalizerKind::kReplace:
        if (step.regex != nullptr) {
          absl::StatusOr<std::string> replaced =
              ReplaceMatches(step, normalized);
          if (!replaced.ok()) return replaced.status();
          normalized = *std::move(replaced);
        } else if (!step.spec.pattern.empty()) {
          normalized = absl::StrReplaceAll(
              normalized, {{step.spec.pattern, step.spec.content}});
        }
        break;
      case NormalizerKind::kStrip: {
        const size_t start = step.spec.strip_left ? LeadingWhitespaceLength(normalized) : 0;
        const size_t end = step.spec.strip_right
                               ? std::max(start, TrailingWhitespaceStart(normalized))
                               : normalized.size();
        normalized = normalized.substr(start, end - start);
        break;
      }
      default: {
        absl::StatusOr<std::string> formed =
            NormalizeForm(step.spec.kind, normalized);
        if (!formed.ok()) return formed.status();
        normalized = *std::move(formed);
      }
    }
  }
  return normalized;
}

}  // namespace kvjit::tokenizer
