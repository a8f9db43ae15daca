#ifndef KVJIT_TOOLS_SERVE_SCHEDULERTHREAD_H_
#define KVJIT_TOOLS_SERVE_SCHEDULERTHREAD_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "runtime/generation/BeamSearch.h"
#include "runtime/generation/BatchScheduler.h"
#include "runtime/exec/StepRunner.h"
#include "runtime/sampling/Sampler.h"
#include "runtime/sampling/StopChecker.h"
#include "tools/serve/ChoiceOutput.h"
#include "tools/serve/RequestStream.h"
#include "tools/serve/ServerMetrics.h"
#include "tools/serve/TextCodec.h"

namespace kvjit::serve {

struct SchedulerThreadOptions {
  // New tokens one step may carry (BatchSchedulerOptions::max_batch_tokens).
  int64_t max_batch_tokens = 256;
  int64_t context_length = 0;
  bool enable_prefix_caching = true;
  // Requests without a first token yet (queued or prefilling) beyond which
  // Submit refuses more.
  int64_t max_queued = 256;
  // Speculative decoding, the server's for every request
  // (BatchSchedulerOptions); the drafter is not owned and may be null.
  runtime::Drafter* drafter = nullptr;
  int64_t draft_tokens = 0;
  int64_t speculation_max_batch = runtime::BatchSchedulerOptions().speculation_max_batch;
};

// A request as the scheduler thread runs it: tokenized, and checked against
// the model.
struct TokenizedRequest {
  std::vector<int32_t> prompt;
  // The seed is set; choice i samples with seed + i.
  sampling::SamplingParams sampling;
  int64_t num_choices = 1;
  // Every choice's stop tokens, stop strings and max_tokens, which must be
  // set and fit the context after the prompt.
  sampling::StopConditions stop;
  // nullopt, or the alternatives to report per token.
  std::optional<int64_t> top_logprobs;
  // Beam search instead of sampling: the best hypotheses are the choices.
  std::optional<runtime::BeamSearchParams> beam_search;
  // What every choice's tokens must match (structured outputs); none when
  // null.
  std::shared_ptr<const grammar::CompiledGrammar> grammar;
  std::chrono::steady_clock::time_point arrival = std::chrono::steady_clock::now();
};

// The thread that alone owns the BatchScheduler over the runner's KV pool.
// HTTP threads Submit requests; the thread admits them at its next step,
// steps the scheduler while any request runs, and streams each choice's text
// through the request's RequestStream as tokens are drawn. A request whose
// stream was cancelled leaves the batch before the next step, its blocks
// back in the pool.
//
// Beam search runs alone (BatchScheduler::RunBeamSearch): a beam request
// waits, and holds back the requests queued after it, until the batch has
// drained; then it runs to its end and the batch resumes.
class SchedulerThread {
 public:
  // `runner`, `codec` and `metrics` must outlive the scheduler thread.
  static absl::StatusOr<std::unique_ptr<SchedulerThread>> Start(
      runtime::StepRunner& runner, const TextCodec& codec, const SchedulerThreadOptions& options,
      ServerMetrics& metrics);
  ~SchedulerThread();
  SchedulerThread(const SchedulerThread&) = delete;
  SchedulerThread& operator=(const SchedulerThread&) = delete;

  // Queues a request for the scheduler thread, which marks its stream accepted
  // once it runs or fails it with the reason (a request that can never fit
  // the KV pool is InvalidArgument). ResourceExhausted at once when
  // max_queued requests are already waiting.
  absl::StatusOr<std::shared_ptr<RequestStream>> Submit(TokenizedRequest request);

  // Ends the scheduler thread; requests not finished fail Unavailable.
  void Stop();

  const SchedulerThreadOptions& options() const { return options_; }

 private:
  struct Queued {
    TokenizedRequest request;
    std::shared_ptr<RequestStream> stream;
  };
  // A request in the scheduler.
  struct Running {
    TokenizedRequest request;
    std::shared_ptr<RequestStream> stream;
    std::vector<std::unique_ptr<ChoiceOutput>> choices;
    int64_t unfinished_choices = 0;
    std::optional<std::chrono::steady_clock::time_point> first_token;
  };

  SchedulerThread(const TextCodec& codec, const SchedulerThreadOptions& options,
                  ServerMetrics& metrics, runtime::BatchScheduler scheduler);

  void Loop();
  // Submits queued requests to the scheduler, in order, up to the first beam
  // search request.
  void AdmitQueued();
  void Admit(Queued queued);
  void RunBeamSearch(Queued queued);
  void CancelAbandoned();
  void StepScheduler();
  // Completes the requests whose choices have all finished (all of them,
  // when the scheduler is idle).
  void CompleteFinished();
  void Complete(Running& running, const runtime::RequestResult& result);
  bool OnToken(const runtime::SampledToken& token);
  // Fails every running request (a step failed, or the scheduler thread stops).
  void FailRunning(const absl::Status& error);
  void PublishGauges();
  // One request fewer waits for its first token.
  void Started() { --waiting_; }

  const TextCodec& codec_;
  const SchedulerThreadOptions options_;
  ServerMetrics& metrics_;
  runtime::BatchScheduler scheduler_;

  std::mutex mutex_;
  std::condition_variable work_;
  std::deque<Queued> submitted_;  // guarded by mutex_
  std::atomic<bool> stopping_{false};
  // Submitted requests without a first token yet.
  std::atomic<int64_t> waiting_{0};

  // The scheduler thread's own.
  std::deque<Queued> queue_;
  absl::flat_hash_map<runtime::RequestId, Running> running_;
  std::thread thread_;
};

}  // namespace kvjit::serve

#endif  // KVJIT_TOOLS_SERVE_SCHEDULERTHREAD_H_
