#ifndef KVJIT_RUNTIME_ENGINE_SCHEDULER_H_
#define KVJIT_RUNTIME_ENGINE_SCHEDULER_H_

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "runtime/generation/BackgroundWorker.h"
#include "runtime/generation/BeamSearch.h"
#include "runtime/generation/Drafter.h"
#include "runtime/generation/Speculation.h"
#include "runtime/grammar/GrammarCompiler.h"
#include "runtime/grammar/GrammarMatcher.h"
#include "runtime/exec/StepRunner.h"
#include "runtime/kv/KvBlockManager.h"
#include "runtime/sampling/Sampler.h"

namespace kvjit::runtime {

using RequestId = int64_t;

// Why a request's sample stopped generating. kStopped: the token observer
// (BatchScheduler::SetTokenObserver) ended it, e.g. on a stop string.
// kGrammarEnded: its grammar was complete and allowed none of its stop
// tokens, so no token could follow.
enum class FinishReason { kNone, kEos, kLength, kCancelled, kStopped, kGrammarEnded };

// "eos", "length", "cancelled", "stopped", "grammar" (the names reported to
// users); "" for kNone.
absl::string_view FinishReasonName(FinishReason reason);

struct BatchSchedulerOptions {
  // New tokens one step may carry, decodes and prefill chunks together;
  // 1 to the runner's max_tokens_per_step().
  int64_t max_batch_tokens = 0;
  // The model's context: prompt and generated tokens together.
  int64_t context_length = 0;
  // Whole KV blocks of earlier requests' tokens stay cached (see
  // kv::KvBlockManager) and a request whose tokens start with them skips
  // computing those; off, every request computes its whole prompt.
  bool enable_prefix_caching = true;
  // Speculative decoding (Speculation.h): each decoding sample that may
  // draft feeds up to `draft_tokens` tokens `drafter` proposes after its
  // newest one. Not owned; null turns speculation off.
  Drafter* drafter = nullptr;
  int64_t draft_tokens = 0;
  // Speculate only in steps with at most this many decoding samples: a
  // larger batch already reads each weight for many tokens, so a verify
  // step's extra tokens are no longer nearly free.
  int64_t speculation_max_batch = std::numeric_limits<int64_t>::max();
};

struct RequestMetrics {
  int64_t prompt_tokens = 0;
  // Over all samples.
  int64_t generated_tokens = 0;
  // Tokens whose keys and values came from the prefix cache instead of
  // being computed, over all samples and admissions (a preempted sample's
  // recompute may find its own blocks again).
  int64_t prefix_cached_tokens = 0;
  // From Submit to the first sampled token, so time spent waiting counts.
  double time_to_first_token_s = 0;
  // Mean time between a sample's later tokens, over the samples.
  double time_per_output_token_s = 0;
  // The most KV blocks the request's samples held at once, a block they
  // share counted once.
  int32_t peak_kv_blocks = 0;
  // Times a sample's blocks were taken back and its tokens recomputed.
  int32_t preemptions = 0;
  // Speculative decoding, over all samples: tokens drafted, drafts the model
  // agreed with, and sample steps that verified drafts.
  int64_t drafted_tokens = 0;
  int64_t accepted_tokens = 0;
  int64_t verify_steps = 0;
};

struct SampleResult {
  std::vector<int32_t> tokens;  // generated, without the prompt; a stop token included
  // kEos for a stop token, kLength for max_new_tokens or a full context,
  // kCancelled when Cancel ended it.
  FinishReason finish_reason = FinishReason::kNone;
};

struct RequestResult {
  // One per sample, sample i drawn with seed params.seed + i.
  std::vector<SampleResult> samples;
  RequestMetrics metrics;
};

// A token a sample has just drawn, as the token observer sees it.
struct SampledToken {
  RequestId request;
  // The sample's index in its request (its seed is params.seed + index).
  int64_t sample_index;
  int32_t token;
  // The logits the token was drawn from, before any penalty or temperature;
  // valid during the call only.
  absl::Span<const float> logits;
};

// Sees every sampled token, in the order they are drawn, before the
// scheduler checks its stop tokens and length; returns whether the sample
// may go on. Returning false finishes the sample with kStopped (unless the
// token is a stop token, which finishes it with kEos). It runs inside Step
// and must not call back into the scheduler.
using TokenObserver = std::function<bool(const SampledToken&)>;

// The scheduler's work since it was created.
struct SchedulerCounters {
  int64_t steps = 0;
  int64_t preemptions = 0;
  // Tokens the steps computed: prompts, recomputes and decodes.
  int64_t computed_tokens = 0;
  int64_t cancelled_requests = 0;
  // Steps of decode tokens alone (each token a sequence's next or a draft
  // after it, none a chunk of a prompt or a recompute), their tokens (drafts
  // included) and their time from scheduling to sampled tokens: batched
  // decode apart from the prefills it interleaves with, as
  // llama-batched-bench's generation phase measures it.
  int64_t decode_steps = 0;
  int64_t decode_step_tokens = 0;
  double decode_step_seconds = 0;
  // Speculative decoding: tokens drafted, drafts the model agreed with, and
  // verifications (a step verifying three samples' drafts counts three:
  // vLLM's num_drafts).
  int64_t drafted_tokens = 0;
  int64_t accepted_tokens = 0;
  int64_t verify_steps = 0;
  // Structured output: the masks computed beside the steps (one per
  // constrained sequence that took a token since its last), the time
  // computing them took, and the time a step waited for them after the
  // runner was done.
  int64_t grammar_masks = 0;
  double grammar_mask_seconds = 0;
  double grammar_wait_seconds = 0;
};

// In-flight (continuous) batching over one step runner and its KV pool.
// Each Step packs, in this order and under the token budget: one decode token
// for every running sequence whose tokens are in the cache (oldest first),
// the next prefill chunk of running sequences part way through their prompts,
// then chunks of waiting sequences, which join the batch there. A request
// leaves the step its last sample finishes, and each sample's blocks go back
// to the pool as soon as it finishes. The copy-on-write copies the step's
// reservations queued run on the runner before the step.
//
// A request of N samples (vLLM's `n`) is prefilled once, as one sequence;
// when its prompt's logits come, it forks into N sequences that share the
// prompt's blocks, and each samples its first token from those logits with
// its own sampler (seed + i) and goes on alone.
//
// With prefix caching, a sequence joining the batch first adopts the cached
// whole blocks its tokens start with (all but the last token, whose logits
// it needs), and every step caches the whole blocks it completed.
//
// When the pool runs short, a running sequence that needs a block preempts
// the most recently admitted running sequence not yet in the step (or itself,
// when it is the newest): its blocks are freed and it waits again, first in
// line, to recompute its prompt and generated tokens (a sample of a forked
// request alone: its siblings keep their blocks). Waiting sequences are only
// admitted while their chunk fits the free blocks, and not at all in a step
// that preempted, so preempted work is not readmitted only to be preempted
// again. Since Submit refuses a request one sequence of which the whole pool
// could not hold, the oldest running sequence always gets its tokens and
// every step makes progress.
//
// With a drafter (BatchSchedulerOptions), before a step that decodes at
// most speculation_max_batch samples, the drafter proposes for every
// decoding sample that may draft (DraftPolicy, room left in its request,
// the context and the step), all in one call and before the step reserves
// any slot. A sample's drafts join the step after its newest token, with
// logits at each of them, and take only blocks the pool has free (never a
// preemption); its tokens are taken as Generator takes them
// (TakeVerifiedTokens), and the rejected drafts' slots are cut away
// (KvBlockManager::Truncate; a forked sample wrote them into blocks of its
// own, copied on write). Beam search does not speculate.
class BatchScheduler {
 public:
  static absl::StatusOr<BatchScheduler> Create(StepRunner& runner,
                                               const BatchSchedulerOptions& options);

  // Queues a request of `num_samples` samples, to join the batch at the next
  // Step. An error names the request when it cannot run: an empty prompt, a
  // prompt that leaves no room in the context, max_new_tokens or num_samples
  // below 1, invalid sampling parameters, or a sample whose tokens would not
  // fit the whole KV pool. max_new_tokens is cut to what the context leaves.
  //
  // With a `grammar`, every sample draws only tokens it allows (its matcher
  // made with `stop_token_ids`), and ends kGrammarEnded when none may follow.
  absl::StatusOr<RequestId> Submit(std::vector<int32_t> prompt, sampling::SamplingParams params,
                                   int64_t max_new_tokens, std::vector<int32_t> stop_token_ids,
                                   int64_t num_samples = 1,
                                   std::shared_ptr<const grammar::CompiledGrammar> grammar = nullptr);

  // Ends an unfinished request at once: its blocks go back to the pool and
  // its result holds what each sample generated so far, finished kCancelled
  // (samples that had stopped keep their reason). A finished request whose
  // result is not taken yet is left as it is; NotFound for an unknown or
  // taken one.
  absl::Status Cancel(RequestId id);

  // Runs one step of the batch; a no-op when Idle().
  absl::Status Step();

  // No request is waiting or running.
  bool Idle() const { return waiting_.empty() && running_.empty(); }

  // Streams tokens as they are drawn (a server's per-token output); called
  // from Step on the thread that steps the scheduler. Replaces any earlier
  // observer; an empty one removes it.
  void SetTokenObserver(TokenObserver observer) { token_observer_ = std::move(observer); }

  // Samples holding KV blocks (in the batch) and samples waiting for them
  // (new, or preempted to recompute), over all requests.
  int64_t num_running_sequences() const { return static_cast<int64_t>(running_.size()); }
  int64_t num_waiting_sequences() const { return static_cast<int64_t>(waiting_.size()); }

  // Runs a beam search (BeamSearch::Search) alone over the scheduler's
  // runner and KV pool, so that it shares the pool with the prefix cache
  // instead of overwriting it. A FailedPrecondition error unless Idle(): beam
  // search steps its own beams and cannot join a batch.
  absl::StatusOr<BeamSearchResult> RunBeamSearch(
      const std::vector<int32_t>& prompt, const BeamSearchParams& params,
      const std::function<bool(int64_t)>& keep_going = nullptr);

  // The result of a finished request, handed over once: NotFound for an
  // unknown or already taken request, Unavailable while it is unfinished.
  absl::StatusOr<RequestResult> TakeResult(RequestId id);

  const kv::KvBlockManager& kv_blocks() const { return blocks_; }
  const SchedulerCounters& counters() const { return counters_; }

 private:
  using Clock = std::chrono::steady_clock;
  struct Request;

  // One sample's tokens: the unit the scheduler batches and preempts.
  struct Sequence {
    Sequence(kv::SequenceId id, Request* request, sampling::Sampler sampler,
             std::vector<int32_t> history, int64_t cached_tokens = 0)
        : id(id),
          request(request),
          sampler(std::move(sampler)),
          history(std::move(history)),
          cached_tokens(cached_tokens) {}

    kv::SequenceId id;
    Request* request;
    sampling::Sampler sampler;
    // The prompt, then the generated tokens: what a recompute prefills and
    // what the penalties count.
    std::vector<int32_t> history;
    // Leading tokens of history whose keys and values are in the cache.
    int64_t cached_tokens = 0;
    // Tokens this step feeds (0 when not in the step): of history, then
    // the drafts.
    int64_t step_tokens = 0;
    // What the drafter proposed to follow history, fed in this step after
    // its newest token; empty when the sample does not speculate.
    std::vector<int32_t> drafts;
    DraftPolicy draft_policy;
    // Where the sample is in its request's grammar; none without one.
    std::optional<grammar::GrammarMatcher> grammar;
    FinishReason finish_reason = FinishReason::kNone;
    Clock::time_point first_token;
    Clock::time_point last_token;

    int64_t uncached_tokens() const {
      return static_cast<int64_t>(history.size()) - cached_tokens;
    }
    int64_t generated_tokens() const;
  };

  struct Request {
    RequestId id;
    int64_t prompt_tokens;
    int64_t max_new_tokens;
    int64_t num_samples;
    std::vector<int32_t> stop_token_ids;
    sampling::SamplingParams params;
    std::shared_ptr<const grammar::CompiledGrammar> grammar;
    Clock::time_point submitted;
    // Sample 0 from Submit on; the others from the fork after the prompt.
    std::vector<std::unique_ptr<Sequence>> samples;
    int64_t unfinished_samples;
    RequestMetrics metrics;
  };

  BatchScheduler(StepRunner& runner, const BatchSchedulerOptions& options,
                 kv::KvBlockManager blocks)
      : runner_(runner), options_(options), blocks_(std::move(blocks)) {}

  // Gives `sequence` `count` more tokens in this step, preempting newer
  // sequences not in the step while the pool is short. Returns whether it got
  // them: false when no such sequence is left to preempt.
  absl::StatusOr<bool> ReserveForRunning(Sequence& sequence, int64_t count);
  // Reserves `count` tokens for `sequence`, which the pool must have room
  // for, and takes them from the step's budget.
  absl::Status AddToStep(Sequence& sequence, int64_t count);
  // Admits the first waiting sequence with its cached prefix and first chunk
  // when they fit the free blocks; returns whether it did.
  absl::StatusOr<bool> AdmitWaiting();
  // Frees the blocks of running_[index] and puts it first in line.
  absl::Status Preempt(size_t index);
  // Asks the drafter for the drafts of every decoding sequence that may
  // draft, before the step reserves anything.
  absl::Status ProposeForDecodes();
  // Gives the decodes in `scheduled` their drafts' slots where the pool has
  // them free; drops the other drafts.
  absl::Status AddDraftsToStep(const std::vector<Sequence*>& scheduled);
  // Puts the step's token budget into the step: decodes (and their drafts),
  // running prefills, then new sequences. Returns the sequences in the
  // step, in step order.
  absl::StatusOr<std::vector<Sequence*>> ScheduleStep();
  absl::StatusOr<StepInputs> PackStep(const std::vector<Sequence*>& scheduled) const;
  // Runs the packed step; the grammars of the step's decoding samples
  // compute the masks their next tokens need meanwhile, on another thread.
  absl::StatusOr<absl::Span<const float>> RunStep(const std::vector<Sequence*>& scheduled,
                                                  const StepInputs& inputs);
  void UpdatePeakBlocks(const std::vector<Sequence*>& scheduled);
  // Caches what the step computed; samples each sequence whose step ended
  // its uncached tokens (forking a request's samples off its prompt);
  // finishes samples done generating.
  absl::Status ConsumeLogits(const std::vector<Sequence*>& scheduled,
                             absl::Span<const float> logits);
  // Makes samples 1.. of `first`'s request, sharing its cached prompt.
  absl::StatusOr<std::vector<Sequence*>> ForkSamples(Sequence& first);
  // Draws `sequence`'s tokens from its logits `rows` (one, or one per fed
  // token when it verifies drafts), cuts rejected drafts from the cache,
  // and finishes it when a token ends it.
  absl::Status TakeStepTokens(Sequence& sequence, absl::Span<const float> rows);
  // Appends a drawn token and shows it to the observer; the reason the
  // sample ends with it, kNone when it goes on.
  FinishReason AppendToken(Sequence& sequence, int32_t token, absl::Span<const float> logits);
  void CountVerification(Sequence& sequence, int64_t drafted, int64_t accepted);
  // Takes a sample out of the batch or the line, freeing its blocks.
  absl::Status RemoveSample(Sequence& sequence, FinishReason reason);
  // RemoveSample; the request is done with its last sample.
  absl::Status FinishSample(Sequence& sequence, FinishReason reason);
  void CompleteRequest(Request& request);

  StepRunner& runner_;
  BatchSchedulerOptions options_;
  kv::KvBlockManager blocks_;
  RequestId next_id_ = 0;
  kv::SequenceId next_sequence_id_ = 0;
  int64_t step_budget_left_ = 0;
  bool preempted_this_step_ = false;
  SchedulerCounters counters_;
  absl::flat_hash_map<RequestId, std::unique_ptr<Request>> unfinished_;
  // First in line first: a preempted sequence goes to the front.
  std::deque<Sequence*> waiting_;
  // In admission order (the order preemption undoes).
  std::vector<Sequence*> running_;
  absl::flat_hash_map<RequestId, RequestResult> results_;
  TokenObserver token_observer_;
  // Computes grammar masks beside the steps; started at the first.
  std::unique_ptr<BackgroundWorker> mask_worker_;
};

}  // namespace kvjit::runtime

#endif  // KVJIT_RUNTIME_ENGINE_SCHEDULER_H_
