#include "tools/serve/ChoiceOutput.h"

#include <algorithm>
#include <numeric>
#include <utility>
#include <vector>

#include "runtime/core/StatusMacros.h"
#include "runtime/sampling/Sampler.h"

namespace kvjit::serve {

TokenLogprob LogprobOf(absl::Span<const float> logits, int32_t token, int64_t top) {
  const std::vector<float> logprobs = sampling::LogSoftmax(logits);
  TokenLogprob result;
  result.token = token;
  result.logprob = token >= 0 && token < static_cast<int32_t>(logprobs.size()) ? logprobs[token] : 0;
  const int64_t count = std::min<int64_t>(top, static_cast<int64_t>(logprobs.size()));
  std::vector<int32_t> ids(logprobs.size());
  std::iota(ids.begin(), ids.end(), 0);
  std::partial_sort(ids.begin(), ids.begin() + count, ids.end(), [&](int32_t a, int32_t b) {
    return logprobs[a] != logprobs[b] ? logprobs[a] > logprobs[b] : a < b;
  });
  for (int64_t i = 0; i < count; ++i) result.top.emplace_back(ids[i], logprobs[ids[i]]);
  return result;
}

absl::StatusOr<std::unique_ptr<ChoiceOutput>> ChoiceOutput::Create(
    const TextCodec& codec, sampling::StopConditions stop, std::optional<int64_t> top_logprobs) {
  KVJIT_ASSIGN_OR_RETURN(sampling::StopChecker checker,
                         sampling::StopChecker::Create(std::move(stop)));
  return std::unique_ptr<ChoiceOutput>(
      new ChoiceOutput(codec.NewTextStream(), std::move(checker), top_logprobs));
}

ChoiceDelta ChoiceOutput::Append(int32_t token, absl::Span<const float> logits) {
  ChoiceDelta delta;
  if (finished_) return delta;
  if (top_logprobs_.has_value() && !logits.empty()) {
    delta.logprobs.push_back(LogprobOf(logits, token, *top_logprobs_));
  }
  sampling::StopDecision decision = stop_.Append(token, text_->Push(token));
  delta.text = std::move(decision.text_to_emit);
  if (!decision.stop) return delta;
  finished_ = true;
  // A stop string cuts the text; an end token or the length limit leaves
  // whatever partial character the decoder still holds.
  if (decision.reason != sampling::StopReason::kStopString) delta.text += text_->Flush();
  delta.finish = decision.reason == sampling::StopReason::kLength ? ChoiceFinish::kLength
                                                                   : ChoiceFinish::kStop;
  return delta;
}

ChoiceDelta ChoiceOutput::Close(ChoiceFinish finish) {
  ChoiceDelta delta;
  if (finished_) return delta;
  finished_ = true;
  delta.text = stop_.TakeHeldText() + text_->Flush();
  delta.finish = finish;
  return delta;
}

}  // namespace kvjit::serve
