#include "runtime/tokenizer/Pcre2Regex.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace kvjit::tokenizer {

absl::StatusOr<Pcre2Regex> CompilePcre2(std::string_view pattern, uint32_t options,
                                        std::string_view description) {
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  Pcre2Regex regex(pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                 options, &error_code, &error_offset, nullptr));
  if (regex == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("tokenizer: ", std::string(description),
                                                   " does not compile at offset ", error_offset,
                                                   ": ", Pcre2ErrorMessage(error_code)));
  }
  pcre2_jit_compile(regex.get(), PCRE2_JIT_COMPLETE);
  return regex;
}

std::string Pcre2ErrorMessage(int error_code) {
  PCRE2_UCHAR buffer[256];
  if (pcre2_get_error_message(error_code, buffer, sizeof(buffer)) < 0) {
    return absl::StrCat("PCRE2 error ", error_code);
  }
  return reinterpret_cast<const char*>(buffer);
}

}  // namespace kvjit::tokenizer
