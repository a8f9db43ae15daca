#include "runtime/tokenizer/WordSplitter.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "runtime/tokenizer/Utf8.h"

namespace kvjit::tokenizer {
namespace {

// The pre-tokenizer patterns exactly as the Hugging Face tokenizer.json files
// these vocabularies come from write them, so that such a file is recognised
// by comparing text. GPT-2's is the built-in regex of the ByteLevel step.
constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
constexpr std::string_view kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// SmolLM isolates every digit before applying GPT-2's pattern.
constexpr std::string_view kSingleDigitPattern = R"(\p{N})";

// Under PCRE2_UCP, (?i) folds with Unicode case rules, so that 's' would also
// match U+017F (long s); the contractions are meant in ASCII only, so PCRE2
// gets them spelled out with character classes.
constexpr std::string_view kCaselessContractions =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d))";
constexpr std::string_view kAsciiCaselessContractions =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD]))";

std::string ToPcre2Pattern(std::string_view pattern) {
  std::string pcre2_pattern(pattern);
  if (const size_t at = pcre2_pattern.find(kCaselessContractions);
      at != std::string::npos) {
    pcre2_pattern.replace(at, kCaselessContractions.size(),
                          kAsciiCaselessContractions);
  }
  return pcre2_pattern;
}

}  // namespace

std::vector<std::string_view> PreTokenizerPatterns(PreTokenizer pre_tokenizer) {
  switch (pre_tokenizer) {
    case PreTokenizer::kGpt2:
      return {kGpt2Pattern};
    case PreTokenizer::kLlama3:
      return {kLlama3Pattern};
    case PreTokenizer::kSmolLm:
      return {kSingleDigitPattern, kGpt2Pattern};
    case PreTokenizer::kQwen2:
      return {kQwen2Pattern};
  }
  return {};
}

std::string_view Gpt2Pattern() { return kGpt2Pattern; }

WordSplitter::WordSplitter(std::vector<CompiledRule> rules)
    : rules_(std::move(rules)) {}

absl::StatusOr<std::unique_ptr<WordSplitter>> WordSplitter::Create(
    PreTokenizer pre_tokenizer) {
  std::vector<SplitRule> rules;
  for (std::string_view pattern : PreTokenizerPatterns(pre_tokenizer)) {
    rules.push_back(SplitRule{std::string(pattern)});
  }
  return Create(rules);
}

absl::StatusOr<std::unique_ptr<WordSplitter>> WordSplitter::Create(
    const std::vector<SplitRule>& rules) {
  std::vector<CompiledRule> compiled;
  for (const SplitRule& rule : rules) {
    const std::string pattern = rule.pattern_is_literal
                                    ? rule.pattern
                                    : ToPcre2Pattern(rule.pattern);
    // PCRE2 refuses PCRE2_UCP beside PCRE2_LITERAL; literal text needs no
    // character classes anyway.
    const uint32_t options =
        PCRE2_UTF | (rule.pattern_is_literal ? PCRE2_LITERAL : PCRE2_UCP);
    absl::StatusOr<Pcre2Regex> regex = CompilePcre2(
        pattern, options, absl::StrCat("pre-tokenizer pattern \"", rule.pattern, "\""));
    if (!regex.ok()) return regex.status();
    compiled.push_back(CompiledRule{*std::move(regex), rule.behavior, rule.invert});
  }
  return std::unique_ptr<WordSplitter>(new WordSplitter(std::move(compiled)));
}

absl::StatusOr<std::vector<std::string_view>> WordSplitter::Split(
    std::string_view text) const {
  std::vector<std::string_view> pieces;
  if (!text.empty()) pieces.push_back(text);
  for (const CompiledRule& rule : rules_) {
    Pcre2MatchData match_data(
        pcre2_match_data_create_from_pattern(rule.regex.get(), nullptr));
    if (match_data == nullptr) {
      return absl::ResourceExhaustedError(
          "tokenizer: cannot allocate PCRE2 match data");
    }
    std::vector<std::string_view> finer;
    for (std::string_view piece : pieces) {
      if (absl::Status status =
              SplitPiece(rule, piece, match_data.get(), &finer);
          !status.ok()) {
        return status;
      }
    }
    pieces = std::move(finer);
  }
  return pieces;
}

namespace {

// A stretch of a piece: one match of a rule's pattern, or the text between.
struct Span {
  size_t start;
  size_t end;
  bool is_match;
};

// A piece a rule cuts out, and whether its behavior drops it.
struct Cut {
  size_t start;
  size_t end;
  bool removed;
};

// The pieces `spans` become under `behavior`, folded as Hugging Face's
// NormalizedString::split folds them, so that runs of matches join the same
// way.
std::vector<Cut> ApplyBehavior(const std::vector<Span>& spans,
                               SplitBehavior behavior) {
  std::vector<Cut> cuts;
  bool previous_match = false;
  switch (behavior) {
    case SplitBehavior::kIsolated:
      for (const Span& span : spans) cuts.push_back({span.start, span.end, false});
      break;
    case SplitBehavior::kRemoved:
      for (const Span& span : spans) {
        cuts.push_back({span.start, span.end, span.is_match});
      }
      break;
    case SplitBehavior::kContiguous:
      for (const Span& span : spans) {
        if (span.is_match == previous_match && !cuts.empty()) {
          cuts.back().end = span.end;
        } else {
          cuts.push_back({span.start, span.end, false});
        }
        previous_match = span.is_match;
      }
      break;
    case SplitBehavior::kMergedWithPrevious:
      for (const Span& span : spans) {
        if (span.is_match && !previous_match && !cuts.empty()) {
          cuts.back().end = span.end;
        } else {
          cuts.push_back({span.start, span.end, false});
        }
        previous_match = span.is_match;
      }
      break;
    case SplitBehavior::kMergedWithNext:
      for (auto span = spans.rbegin(); span != spans.rend(); ++span) {
        if (span->is_match && !previous_match && !cuts.empty()) {
          cuts.back().start = span->start;
        } else {
          cuts.push_back({span->start, span->end, false});
        }
        previous_match = span->is_match;
      }
      std::reverse(cuts.begin(), cuts.end());
      break;
  }
  return cuts;
}

}  // namespace

absl::Status WordSplitter::SplitPiece(
    const CompiledRule& rule, std::string_view piece,
    pcre2_match_data* match_data, std::vector<std::string_view>* pieces) const {
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(piece.data());
  std::vector<Span> spans;
  size_t unmatched_start = 0;
  size_t search_start = 0;
  while (search_start <= piece.size()) {
    const int result =
        pcre2_match(rule.regex.get(), subject, piece.size(), search_start,
                    PCRE2_NO_UTF_CHECK, match_data, nullptr);
    if (result == PCRE2_ERROR_NOMATCH) break;
    if (result < 0) {
      return absl::InternalError(
          absl::StrCat("tokenizer: pre-tokenizer regex failed: ",
                       Pcre2ErrorMessage(result)));
    }
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(match_data);
    const size_t match_start = ovector[0];
    const size_t match_end = ovector[1];
    if (match_start > unmatched_start) {
      spans.push_back({unmatched_start, match_start, false});
    }
    // An empty match still cuts the text around it and takes part in the
    // behavior's folding; the next search starts a character further on.
    spans.push_back({match_start, match_end, true});
    unmatched_start = search_start = match_end;
    if (match_end == match_start) {
      if (match_end == piece.size()) break;
      search_start += Utf8SequenceLength(
          static_cast<unsigned char>(piece[search_start]));
    }
  }
  if (unmatched_start < piece.size()) {
    spans.push_back({unmatched_start, piece.size(), false});
  }
  if (rule.invert) {
    for (Span& span : spans) span.is_match = !span.is_match;
  }
  for (const Cut& cut : ApplyBehavior(spans, rule.behavior)) {
    if (!cut.removed && cut.end > cut.start) {
      pieces->push_back(piece.substr(cut.start, cut.end - cut.start));
    }
  }
  return absl::OkStatus();
}

}  // namespace kvjit::tokenizer
