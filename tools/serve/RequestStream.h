#ifndef KVJIT_TOOLS_SERVE_REQUESTSTREAM_H_
#define KVJIT_TOOLS_SERVE_REQUESTSTREAM_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"

namespace kvjit::serve {

// A generated token's log-probability and its most likely alternatives,
// most likely first, from the model's distribution before sampling.
struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0;
  std::vector<std::pair<int32_t, float>> top;
};

// OpenAI's finish_reason: "stop" (an end token or a stop string),
// "length" (max_tokens or the context's end) or "tool_calls" (the reply
// called functions).
enum class ChoiceFinish { kStop, kLength, kToolCalls };

// A function call parsed out of a reply, as OpenAI's tool_calls report it.
struct ToolCall {
  int64_t index = 0;  // among the choice's calls
  std::string id;
  std::string name;
  std::string arguments;  // a JSON object, as text
};

const char* ChoiceFinishName(ChoiceFinish finish);

// What one choice gained: text, the log-probabilities of the tokens that
// made it, and at its end, why it ended.
struct ChoiceDelta {
  int64_t index = 0;
  std::string text;
  std::vector<TokenLogprob> logprobs;
  std::vector<ToolCall> tool_calls;
  std::optional<ChoiceFinish> finish;
};

// The server's clock for one request that produced a token.
struct RequestTimings {
  // From the request's arrival (queue wait and prefill) to its first token.
  double time_to_first_token_s = 0;
  // From the first token to the last.
  double generation_s = 0;
  // The mean time between two tokens of a sequence; none below two tokens.
  std::optional<double> time_per_output_token_s;
};

struct RequestUsage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  // Prompt tokens whose keys and values came from the prefix cache.
  int64_t cached_prompt_tokens = 0;
  std::optional<RequestTimings> timings;
};

// The channel between the scheduler thread, which runs one request, and the
// HTTP thread answering it. The scheduler thread marks it accepted once the
// request runs (or fails it before that, with the reason to answer), pushes
// each choice's deltas as tokens come, and completes it; the HTTP thread
// waits for news and cancels the request when its client goes away.
class RequestStream {
 public:
  // The scheduler thread's side.
  void MarkAccepted();
  void Push(ChoiceDelta delta);
  void Complete(const RequestUsage& usage);
  void Fail(absl::Status error);

  // What the HTTP thread learns in one Wait: the deltas since the last Wait,
  // and the request's state.
  struct Update {
    std::vector<ChoiceDelta> deltas;
    bool accepted = false;
    bool complete = false;
    RequestUsage usage;
    absl::Status error;  // set once it failed: no more news comes
    bool finished() const { return complete || !error.ok(); }
  };

  // Returns at once when there is news since the last Wait, else within
  // `timeout` (with whatever came by then).
  Update Wait(std::chrono::milliseconds timeout);

  // The client went away: the scheduler thread ends the request at its next
  // step.
  void Cancel() { cancelled_.store(true); }
  bool cancelled() const { return cancelled_.load(); }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<ChoiceDelta> deltas_;
  bool news_ = false;
  bool accepted_ = false;
  bool complete_ = false;
  RequestUsage usage_;
  absl::Status error_;
  std::atomic<bool> cancelled_{false};
};

}  // namespace kvjit::serve

#endif  // KVJIT_TOOLS_SERVE_REQUESTSTREAM_H_
