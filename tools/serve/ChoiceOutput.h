#ifndef KVJIT_TOOLS_SERVE_CHOICEOUTPUT_H_
#define KVJIT_TOOLS_SERVE_CHOICEOUTPUT_H_

#include <cstdint>
#include <memory>
#include <optional>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "runtime/sampling/StopChecker.h"
#include "tools/serve/RequestStream.h"
#include "tools/serve/TextCodec.h"

namespace kvjit::serve {

// The log-probability of `token` under `logits` and the `top` most likely
// tokens (ties to the lower id), from log_softmax of the raw logits.
TokenLogprob LogprobOf(absl::Span<const float> logits, int32_t token, int64_t top);

// One choice's output as its tokens come: their text in whole UTF-8
// characters, cut before a stop string; their log-probabilities when asked;
// and the token at which the choice ends (stop token, stop string or
// max_tokens, as sampling::StopChecker decides).
class ChoiceOutput {
 public:
  // `codec` must outlive this. An InvalidArgument error for an empty stop
  // string or a max_tokens below 1.
  static absl::StatusOr<std::unique_ptr<ChoiceOutput>> Create(
      const TextCodec& codec, sampling::StopConditions stop, std::optional<int64_t> top_logprobs);

  // What `token` adds (its index left 0); `logits` are those it was drawn
  // from, needed only for log-probabilities. Sets finish when the choice
  // ends here.
  ChoiceDelta Append(int32_t token, absl::Span<const float> logits);

  // Ends a choice that ended without a stop decision: the text still held
  // back, with finish "length" (the context was full) or "stop" (its
  // grammar allowed no more).
  ChoiceDelta Close(ChoiceFinish finish = ChoiceFinish::kLength);

  bool finished() const { return finished_; }

 private:
  ChoiceOutput(std::unique_ptr<TokenTextStream> text, sampling::StopChecker stop,
               std::optional<int64_t> top_logprobs)
      : text_(std::move(text)), stop_(std::move(stop)), top_logprobs_(top_logprobs) {}

  std::unique_ptr<TokenTextStream> text_;
  sampling::StopChecker stop_;
  std::optional<int64_t> top_logprobs_;
  bool finished_ = false;
};

}  // namespace kvjit::serve

#endif  // KVJIT_TOOLS_SERVE_CHOICEOUTPUT_H_
