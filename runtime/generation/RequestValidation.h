#ifndef KVJIT_RUNTIME_ENGINE_REQUESTVALIDATION_H_
#define KVJIT_RUNTIME_ENGINE_REQUESTVALIDATION_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace kvjit::runtime {

// What a runner and its context allow a request.
struct RequestLimits {
  int64_t vocab_size = 0;
  int64_t context_length = 0;
};

// The checks every way of running a request (Generator, BeamSearch,
// BatchScheduler) makes before its first step, so that no step fails on a
// request that could never run: a prompt of at least one token, each inside
// the vocabulary, that leaves room in the context, and at least one new
// token. Returns the new tokens the request may make: `max_new_tokens`, cut
// to what the context leaves after the prompt. An error starts with
// `request` ("request 7") and names the value.
absl::StatusOr<int64_t> ValidateRequest(absl::string_view request,
                                        absl::Span<const int32_t> prompt, int64_t max_new_tokens,
                                        const RequestLimits& limits);

}  // namespace kvjit::runtime

#endif  // KVJIT_RUNTIME_ENGINE_REQUESTVALIDATION_H_
