#ifndef KVJIT_RUNTIME_TOKENIZER_PCRE2REGEX_H
#define KVJIT_RUNTIME_TOKENIZER_PCRE2REGEX_H

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

#ifndef PCRE2_CODE_UNIT_WIDTH
#define PCRE2_CODE_UNIT_WIDTH 8
#endif
#include <pcre2.h>

namespace kvjit::tokenizer {

struct Pcre2CodeDeleter {
  void operator()(pcre2_code* code) const { pcre2_code_free(code); }
};
struct Pcre2MatchDataDeleter {
  void operator()(pcre2_match_data* data) const { pcre2_match_data_free(data); }
};
using Pcre2Regex = std::unique_ptr<pcre2_code, Pcre2CodeDeleter>;
using Pcre2MatchData = std::unique_ptr<pcre2_match_data, Pcre2MatchDataDeleter>;

// `pattern` compiled with `options` (and JIT-compiled where PCRE2 can: only
// faster, never required); an error names `description` ("tokenizer:
// <description> does not compile at offset N: <PCRE2's reason>").
absl::StatusOr<Pcre2Regex> CompilePcre2(std::string_view pattern, uint32_t options,
                                        std::string_view description);

// PCRE2's text for an error code.
std::string Pcre2ErrorMessage(int error_code);

}  // namespace kvjit::tokenizer

#endif  // KVJIT_RUNTIME_TOKENIZER_PCRE2REGEX_H
