#ifndef KVJIT_RUNTIME_ENGINE_SCHEDULER_H_
#define KVJIT_RUNTIME_ENGINE_SCHEDULER_H_

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/exec/StepRunner.h"
#include "runtime/kv/KvBlockManager.h"
#include "runtime/sampling/Sampler.h"
#include "runtime/sampling/StopChecker.h"

namespace kvjit::runtime {

using RequestId = int64_t;

struct BatchSchedulerOptions {
  // New tokens one step may carry, decodes and prefill chunks together;
  // 1 to the runner's max_tokens_per_step().
  int64_t max_batch_tokens = 0;
  // The model's context: prompt and generated tokens together.
  int64_t context_length = 0;
};

struct RequestMetrics {
  int64_t prompt_tokens = 0;
  int64_t generated_tokens = 0;
  // From Submit to the first sampled token, so time spent waiting counts.
  double time_to_first_token_s = 0;
  // Mean time between the request's later tokens.
  double time_per_output_token_s = 0;
  // The most KV blocks the request held at once.
  int32_t peak_kv_blocks = 0;
  // Times its blocks were taken back and its tokens recomputed.
  int32_t preemptions = 0;
};

struct RequestResult {
  std::vector<int32_t> tokens;  // generated, without the prompt; a stop token included
  // kEos for a stop token, kLength for max_new_tokens or a full context.
  sampling::StopReason finish_reason = sampling::StopReason::kNone;
  RequestMetrics metrics;
};

// In-flight (continuous) batching over one step runner and its KV pool.
// Each Step packs, in this order and under the token budget: one decode token
// for every running request whose prompt is in the cache (oldest first), the
// next prefill chunk of running requests part way through their prompts, then
// chunks of waiting requests, which join the batch there. A request leaves
// the step it finishes, and its blocks go back to the pool at once.
//
// When the pool runs short, a running request that needs a block preempts the
// most recently admitted running request not yet in the step (or itself, when
// it is the newest): its blocks are freed and it waits again, first in line,
// to recompute its prompt and generated tokens. Waiting requests are only
// admitted while their chunk fits the free blocks, and not at all in a step
// that preempted, so preempted work is not readmitted only to be preempted
// again. Since Submit refuses a request the whole pool could not hold, the
// oldest running request always gets its tokens and every step makes progress.
class BatchScheduler {
 public:
  static absl::StatusOr<BatchScheduler> Create(StepRunner& runner,
                                               const BatchSchedulerOptions& options);

  // Queues a request, to join the batch at the next Step. An error names the
  // request when it cannot run: an empty prompt, a prompt that leaves no room
  // in the context, max_new_tokens below 1, invalid sampling parameters, or a
  // request whose tokens would not fit the whole KV pool. max_new_tokens is
  // cut to what the context leaves.
  absl::StatusOr<RequestId> Submit(std::vector<int32_t> prompt, sampling::SamplingParams params,
                                   int64_t max_new_tokens, std::vector<int32_t> stop_token_ids);

  // Runs one step of the batch; a no-op when Idle().
  absl::Status Step();

  // No request is waiting or running.
  bool Idle() const { return waiting_.empty() && running_.empty(); }

  // The result of a finished request, handed over once: NotFound for an
  // unknown or already taken request, Unavailable while it is unfinished.
  absl::StatusOr<RequestResult> TakeResult(RequestId id);

  const kv::KvBlockManager& kv_blocks() const { return blocks_; }

 private:
  using Clock = std::chrono::steady_clock;

  struct Request {
    RequestId id;
    int64_t prompt_tokens;
    int64_t max_new_tokens;
    std::vector<int32_t> stop_token_ids;
    sampling::Sampler sampler;
    // The prompt, then the generated tokens: what a recompute prefills and
    // what the penalties count.
    std::vector<int32_t> history;
    // Leading tokens of history whose keys and values are in the cache.
    int64_t cached_tokens = 0;
    // Tokens of history this step feeds (0 when not in the step).
    int64_t step_tokens = 0;
    Clock::time_point submitted;
    Clock::time_point first_token;
    Clock::time_point last_token;
    RequestMetrics metrics;

    int64_t uncached_tokens() const {
      return static_cast<int64_t>(history.size()) - cached_tokens;
    }
    int64_t generated_tokens() const {
      return static_cast<int64_t>(history.size()) - prompt_tokens;
    }
  };

  BatchScheduler(StepRunner& runner, const BatchSchedulerOptions& options,
                 kv::KvBlockManager blocks)
      : runner_(runner), options_(options), blocks_(std::move(blocks)) {}

  // Gives `request` `count` more tokens in this step, preempting newer
  // requests not in the step while the pool is short. Returns whether it got
  // them: false when no such request is left to preempt.
  absl::StatusOr<bool> ReserveForRunning(Request& request, int64_t count);
  // Reserves `count` tokens for `request`, which the pool must have room for,
  // and takes them from the step's budget.
  absl::Status AddToStep(Request& request, int64_t count);
  // Frees the blocks of running_[index] and puts it first in line.
  absl::Status Preempt(size_t index);
  // Puts the step's token budget into the step: decodes, running prefills,
  // then new requests. Returns the requests in the step, in step order.
  absl::StatusOr<std::vector<Request*>> ScheduleStep();
  absl::StatusOr<StepInputs> PackStep(const std::vector<Request*>& scheduled) const;
  // Samples each request whose step ended its uncached tokens; finishes
  // requests done generating.
  absl::Status ConsumeLogits(const std::vector<Request*>& scheduled,
                             absl::Span<const float> logits);
  absl::Status Finish(Request& request, sampling::StopReason reason);

  StepRunner& runner_;
  BatchSchedulerOptions options_;
  kv::KvBlockManager blocks_;
  RequestId next_id_ = 0;
  int64_t step_budget_left_ = 0;
  bool preempted_this_step_ = false;
  // First in line first: a preempted request goes to the front.
  std::deque<std::unique_ptr<Request>> waiting_;
  // In admission order (the order preemption undoes).
  std::vector<std::unique_ptr<Request>> running_;
  absl::flat_hash_map<RequestId, std::optional<RequestResult>> results_;
};

}  // namespace kvjit::runtime

#endif  // KVJIT_RUNTIME_ENGINE_SCHEDULER_H_
