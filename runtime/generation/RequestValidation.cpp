#include "runtime/generation/RequestValidation.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace kvjit::runtime {

absl::StatusOr<int64_t> ValidateRequest(absl::string_view request,
                                        absl::Span<const int32_t> prompt, int64_t max_new_tokens,
                                        const RequestLimits& limits) {
  const int64_t prompt_tokens = static_cast<int64_t>(prompt.size());
  if (prompt_tokens == 0) {
    return absl::InvalidArgumentError(absl::StrCat(request, ": the prompt has no tokens"));
  }
  for (int64_t i = 0; i < prompt_tokens; ++i) {
    if (prompt[i] < 0 || prompt[i] >= limits.vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat(request, ": prompt token ", i, " is ",
                                                     prompt[i], ", outside the vocabulary of ",
                                                     limits.vocab_size));
    }
  }
  if (prompt_tokens >= limits.context_length) {
    return absl::OutOfRangeError(absl::StrCat(request, ": the prompt's ", prompt_tokens,
                                              " tokens leave no room in the context of ",
                                              limits.context_length));
  }
  if (max_new_tokens < 1) {
    return absl::InvalidArgumentError(absl::StrCat(request, ": max_new_tokens is ",
                                                   max_new_tokens, "; it must be at least 1"));
  }
  return std::min(max_new_tokens, limits.context_length - prompt_tokens);
}

}  // namespace kvjit::runtime
