#include "frontend/tokenizer/WordSplitter.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"

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

std::string Pcre2ErrorMessage(int error_code) {
  PCRE2_UCHAR buffer[256];
  if (pcre2_get_error_message(error_code, buffer, sizeof(buffer)) < 0) {
    return absl::StrCat("PCRE2 error ", error_code);
  }
  return reinterpret_cast<const char*>(buffer);
}

struct MatchDataDeleter {
  void operator()(pcre2_match_data* data) const { pcre2_match_data_free(data); }
};

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

WordSplitter::WordSplitter(std::vector<Regex> regexes)
    : regexes_(std::move(regexes)) {}

absl::StatusOr<std::unique_ptr<WordSplitter>> WordSplitter::Create(
    PreTokenizer pre_tokenizer) {
  std::vector<Regex> regexes;
  for (std::string_view tokenizer_json_pattern :
       PreTokenizerPatterns(pre_tokenizer)) {
    const std::string pattern = ToPcre2Pattern(tokenizer_json_pattern);
    int error_code = 0;
    PCRE2_SIZE error_offset = 0;
    Regex regex(pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()),
                              pattern.size(), PCRE2_UTF | PCRE2_UCP,
                              &error_code, &error_offset, nullptr));
    if (regex == nullptr) {
      return absl::InternalError(absl::StrCat(
          "tokenizer: pre-tokenizer pattern does not compile at offset ",
          error_offset, ": ", Pcre2ErrorMessage(error_code)));
    }
    // JIT is only faster, not required: without it PCRE2 interprets.
    pcre2_jit_compile(regex.get(), PCRE2_JIT_COMPLETE);
    regexes.push_back(std::move(regex));
  }
  return std::unique_ptr<WordSplitter>(new WordSplitter(std::move(regexes)));
}

absl::StatusOr<std::vector<std::string_view>> WordSplitter::Split(
    std::string_view text) const {
  std::vector<std::string_view> pieces;
  if (!text.empty()) pieces.push_back(text);
  for (const Regex& regex : regexes_) {
    std::unique_ptr<pcre2_match_data, MatchDataDeleter> match_data(
        pcre2_match_data_create_from_pattern(regex.get(), nullptr));
    if (match_data == nullptr) {
      return absl::ResourceExhaustedError(
          "tokenizer: cannot allocate PCRE2 match data");
    }
    std::vector<std::string_view> finer;
    for (std::string_view piece : pieces) {
      if (absl::Status status =
              SplitPiece(regex.get(), piece, match_data.get(), &finer);
          !status.ok()) {
        return status;
      }
    }
    pieces = std::move(finer);
  }
  return pieces;
}

absl::Status WordSplitter::SplitPiece(
    const pcre2_code* regex, std::string_view piece,
    pcre2_match_data* match_data, std::vector<std::string_view>* pieces) const {
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(piece.data());
  size_t unmatched_start = 0;
  size_t search_start = 0;
  while (search_start < piece.size()) {
    const int result = pcre2_match(regex, subject, piece.size(), search_start,
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
    if (match_end == match_start) {
      // None of the patterns matches empty text; stepping one character on
      // guards against looping should one ever do so.
      search_start = match_start + 1;
      while (search_start < piece.size() &&
             (static_cast<unsigned char>(piece[search_start]) & 0xC0) == 0x80) {
        ++search_start;
      }
      continue;
    }
    if (match_start > unmatched_start) {
      pieces->push_back(
          piece.substr(unmatched_start, match_start - unmatched_start));
    }
    pieces->push_back(piece.substr(match_start, match_end - match_start));
    unmatched_start = search_start = match_end;
  }
  if (unmatched_start < piece.size()) {
    pieces->push_back(piece.substr(unmatched_start));
  }
  return absl::OkStatus();
}

}  // namespace kvjit::tokenizer
