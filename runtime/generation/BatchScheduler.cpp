#include "runtime/generation/BatchScheduler.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "runtime/core/StatusMacros.h"
#include "runtime/generation/RequestValidation.h"
#include "runtime/generation/SpeculativeStep.h"
#include "runtime/generation/StepBuilder.h"

namespace kvjit::runtime {
namespace {

double SecondsBetween(std::chrono::steady_clock::time_point start,
                      std::chrono::steady_clock::time_point end) {
  return std::chrono::duration<double>(end - start).count();
}

absl::Status NameRequest(RequestId id, const absl::Status& status) {
  if (status.ok()) return status;
  return absl::Status(status.code(), absl::StrCat("request ", id, ": ", status.message()));
}

}  // namespace

absl::string_view FinishReasonName(FinishReason reason) {
  switch (reason) {
    case FinishReason::kNone:
      return "";
    case FinishReason::kEos:
      return "eos";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kCancelled:
      return "cancelled";
    case FinishReason::kStopped:
      return "stopped";
    case FinishReason::kGrammarEnded:
      return "grammar";
  }
  return "";
}

int64_t BatchScheduler::Sequence::generated_tokens() const {
  return static_cast<int64_t>(history.size()) - request->prompt_tokens;
}

absl::StatusOr<BatchScheduler> BatchScheduler::Create(StepRunner& runner,
                                                      const BatchSchedulerOptions& options) {
  if (options.max_batch_tokens < 1 || options.max_batch_tokens > runner.max_tokens_per_step()) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_batch_tokens must be 1 to the program's ", runner.max_tokens_per_step(),
                     " tokens per step, got ", options.max_batch_tokens));
  }
  if (options.drafter != nullptr &&
      (options.draft_tokens < 1 || options.speculation_max_batch < 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "speculative decoding needs draft_tokens and speculation_max_batch of at least 1, got ",
        options.draft_tokens, " and ", options.speculation_max_batch));
  }
  if (options.context_length < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the context must hold a prompt token and a generated one, got ", options.context_length));
  }
  if (runner.num_blocks() > std::numeric_limits<int32_t>::max() ||
      runner.block_size() > std::numeric_limits<int32_t>::max()) {
    return absl::InvalidArgumentError(absl::StrCat("a pool of ", runner.num_blocks(), " blocks of ",
                                                   runner.block_size(),
                                                   " tokens is more than the KV manager can count"));
  }
  KVJIT_ASSIGN_OR_RETURN(kv::KvBlockManager blocks,
                         kv::KvBlockManager::Create(static_cast<int32_t>(runner.num_blocks()),
                                                    static_cast<int32_t>(runner.block_size())));
  return BatchScheduler(runner, options, std::move(blocks));
}

absl::StatusOr<RequestId> BatchScheduler::Submit(std::vector<int32_t> prompt,
                                                 sampling::SamplingParams params,
                                                 int64_t max_new_tokens,
                                                 std::vector<int32_t> stop_token_ids,
                                                 int64_t num_samples,
                                                 std::shared_ptr<const grammar::CompiledGrammar> grammar) {
  const RequestId id = next_id_++;
  const int64_t prompt_tokens = static_cast<int64_t>(prompt.size());
  // Checked here, not by the step that would embed it: a failed step leaves
  // every request in it stuck.
  KVJIT_ASSIGN_OR_RETURN(max_new_tokens,
                         ValidateRequest(absl::StrCat("request ", id), prompt, max_new_tokens,
                                         {runner_.vocab_size(), options_.context_length}));
  if (num_samples < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("request ", id, ": num_samples must be at least 1, got ", num_samples));
  }
  // The last generated token is never fed back, so never cached.
  const int64_t most_cached_tokens = prompt_tokens + max_new_tokens - 1;
  const int64_t most_blocks = (most_cached_tokens + blocks_.block_size() - 1) / blocks_.block_size();
  if (most_blocks > blocks_.num_blocks()) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "request ", id, ": its ", most_cached_tokens, " cached tokens would take ", most_blocks,
        " KV blocks of ", blocks_.block_size(), " tokens; the pool has ", blocks_.num_blocks()));
  }
  auto sampler = sampling::Sampler::Create(params);
  if (!sampler.ok()) return NameRequest(id, sampler.status());

  const Clock::time_point now = Clock::now();
  auto request = std::make_unique<Request>(Request{id, prompt_tokens, max_new_tokens, num_samples,
                                                   std::move(stop_token_ids), params,
                                                   std::move(grammar), now,
                                                   /*samples=*/{}, num_samples, RequestMetrics{}});
  request->metrics.prompt_tokens = prompt_tokens;
  request->samples.push_back(std::make_unique<Sequence>(
      Sequence{next_sequence_id_++, request.get(), *std::move(sampler), std::move(prompt)}));
  if (request->grammar) {
    request->samples.front()->grammar = request->grammar->NewMatcher(request->stop_token_ids);
  }
  waiting_.push_back(request->samples.front().get());
  unfinished_.emplace(id, std::move(request));
  return id;
}

absl::StatusOr<RequestResult> BatchScheduler::TakeResult(RequestId id) {
  if (unfinished_.contains(id)) {
    return absl::UnavailableError(absl::StrCat("request ", id, " has not finished"));
  }
  auto it = results_.find(id);
  if (it == results_.end()) {
    return absl::NotFoundError(absl::StrCat("request ", id, " is unknown or its result was taken"));
  }
  RequestResult result = std::move(it->second);
  results_.erase(it);
  return result;
}

absl::Status BatchScheduler::Cancel(RequestId id) {
  auto it = unfinished_.find(id);
  if (it == unfinished_.end()) {
    if (results_.contains(id)) return absl::OkStatus();
    return absl::NotFoundError(
        absl::StrCat("cannot cancel request ", id, ": it is unknown or its result was taken"));
  }
  Request& request = *it->second;
  for (const auto& sample : request.samples) {
    if (sample->finish_reason == FinishReason::kNone) {
      KVJIT_RETURN_IF_ERROR(RemoveSample(*sample, FinishReason::kCancelled));
    }
  }
  ++counters_.cancelled_requests;
  CompleteRequest(request);
  return absl::OkStatus();
}

absl::Status BatchScheduler::Preempt(size_t index) {
  Sequence& sequence = *running_[index];
  KVJIT_RETURN_IF_ERROR(NameRequest(sequence.request->id, blocks_.Free(sequence.id)));
  sequence.cached_tokens = 0;
  sequence.drafts.clear();
  if (options_.drafter != nullptr) {
    KVJIT_RETURN_IF_ERROR(
        NameRequest(sequence.request->id, options_.drafter->Forget(sequence.id)));
  }
  ++sequence.request->metrics.preemptions;
  ++counters_.preemptions;
  waiting_.push_front(&sequence);
  running_.erase(running_.begin() + static_cast<std::ptrdiff_t>(index));
  preempted_this_step_ = true;
  return absl::OkStatus();
}

absl::StatusOr<bool> BatchScheduler::ReserveForRunning(Sequence& sequence, int64_t count) {
  while (true) {
    KVJIT_ASSIGN_OR_RETURN(int64_t needed, blocks_.BlocksNeeded(sequence.id, count));
    if (needed <= blocks_.num_free_blocks()) break;
    // The newest running sequence that is not in the step; sequences in the
    // step are never taken back, so the step built so far stays valid.
    size_t victim = running_.size();
    for (size_t i = running_.size(); i-- > 0 && running_[i] != &sequence;) {
      if (running_[i]->step_tokens == 0) {
        victim = i;
        break;
      }
    }
    if (victim == running_.size()) return false;
    KVJIT_RETURN_IF_ERROR(Preempt(victim));
  }
  KVJIT_RETURN_IF_ERROR(AddToStep(sequence, count));
  return true;
}

absl::Status BatchScheduler::AddToStep(Sequence& sequence, int64_t count) {
  KVJIT_RETURN_IF_ERROR(NameRequest(sequence.request->id, blocks_.Reserve(sequence.id, count)));
  sequence.step_tokens = count;
  step_budget_left_ -= count;
  return absl::OkStatus();
}

absl::StatusOr<bool> BatchScheduler::AdmitWaiting() {
  Sequence& sequence = *waiting_.front();
  // The last token is always computed: its logits pick the next one.
  const absl::Span<const int32_t> reusable =
      absl::MakeConstSpan(sequence.history).first(sequence.history.size() - 1);
  const kv::PrefixMatch match =
      options_.enable_prefix_caching ? blocks_.MatchPrefix(reusable) : kv::PrefixMatch{};
  const int64_t count =
      std::min(static_cast<int64_t>(sequence.history.size()) - match.num_tokens, step_budget_left_);
  KVJIT_ASSIGN_OR_RETURN(int64_t needed, blocks_.BlocksNeeded(sequence.id, count));
  if (match.num_evictable_blocks + needed > blocks_.num_free_blocks()) return false;
  if (match.num_tokens > 0) {
    KVJIT_ASSIGN_OR_RETURN(sequence.cached_tokens, blocks_.AdoptCachedPrefix(sequence.id, reusable));
    sequence.request->metrics.prefix_cached_tokens += sequence.cached_tokens;
  }
  running_.push_back(&sequence);
  waiting_.pop_front();
  KVJIT_RETURN_IF_ERROR(AddToStep(sequence, count));
  return true;
}

absl::Status BatchScheduler::ProposeForDecodes() {
  if (options_.drafter == nullptr) return absl::OkStatus();
  std::vector<Sequence*> decoding;
  for (Sequence* sequence : running_) {
    if (sequence->uncached_tokens() == 1) decoding.push_back(sequence);
  }
  const int64_t decodes = static_cast<int64_t>(decoding.size());
  if (decodes == 0 || decodes > options_.speculation_max_batch) return absl::OkStatus();
  // Every decode keeps its token in the step; drafts share what is left.
  int64_t budget = options_.max_batch_tokens - decodes;
  // Each sample's drafts are weighed against the step as the samples before
  // it left it (SampleStepCost).
  int64_t step_tokens = decodes;
  const double draft_cost = options_.drafter->cost_per_token();
  std::vector<DraftRequest> requests;
  std::vector<Sequence*> drafting;
  for (Sequence* sequence : decoding) {
    const int64_t position = static_cast<int64_t>(sequence->history.size()) - 1;
    // A prompt's last token picks the first token alone, as Generator's
    // does: a request of several samples forks its blocks there.
    if (sequence->generated_tokens() == 0) continue;
    const int64_t room = sequence->draft_policy.DraftLength(
        std::min({options_.draft_tokens,
                  sequence->request->max_new_tokens - sequence->generated_tokens() - 1,
                  options_.context_length - position - 1, budget}),
        [&](int64_t tokens) {
          return SampleStepCost(runner_, draft_cost, step_tokens, decodes, tokens);
        });
    if (room < 1) continue;
    requests.push_back({sequence->id, sequence->history, sequence->cached_tokens, room});
    drafting.push_back(sequence);
    budget -= room;
    step_tokens += room;
  }
  if (requests.empty()) return absl::OkStatus();
  KVJIT_ASSIGN_OR_RETURN(std::vector<std::vector<int32_t>> drafts,
                         ProposeDrafts(*options_.drafter, requests, blocks_));
  for (size_t i = 0; i < drafting.size(); ++i) drafting[i]->drafts = std::move(drafts[i]);
  return absl::OkStatus();
}

absl::Status BatchScheduler::AddDraftsToStep(const std::vector<Sequence*>& scheduled) {
  for (Sequence* sequence : scheduled) {
    const int64_t drafted = static_cast<int64_t>(sequence->drafts.size());
    if (drafted == 0) continue;
    KVJIT_ASSIGN_OR_RETURN(int64_t needed, blocks_.BlocksNeeded(sequence->id, drafted));
    if (needed > blocks_.num_free_blocks() || drafted > step_budget_left_) {
      sequence->drafts.clear();
      continue;
    }
    KVJIT_RETURN_IF_ERROR(NameRequest(sequence->request->id, blocks_.Reserve(sequence->id, drafted)));
    sequence->step_tokens += drafted;
    step_budget_left_ -= drafted;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<BatchScheduler::Sequence*>> BatchScheduler::ScheduleStep() {
  step_budget_left_ = options_.max_batch_tokens;
  preempted_this_step_ = false;
  for (Sequence* sequence : running_) {
    sequence->step_tokens = 0;
    sequence->drafts.clear();
  }
  KVJIT_RETURN_IF_ERROR(ProposeForDecodes());
  std::vector<Sequence*> scheduled;

  // Decodes first, oldest first, so a long prefill never stalls them. A
  // decode that finds no sequence newer than itself to preempt is the newest
  // running sequence, and gives up its own blocks.
  for (size_t i = 0; i < running_.size() && step_budget_left_ > 0; ++i) {
    Sequence& sequence = *running_[i];
    if (sequence.uncached_tokens() != 1) continue;
    KVJIT_ASSIGN_OR_RETURN(bool reserved, ReserveForRunning(sequence, 1));
    if (!reserved) {
      KVJIT_RETURN_IF_ERROR(Preempt(i));
      break;
    }
    scheduled.push_back(&sequence);
  }
  KVJIT_RETURN_IF_ERROR(AddDraftsToStep(scheduled));
  // Then the prompts already under way: one without a block to grow into
  // waits for the decodes in the step to finish and free theirs.
  for (size_t i = 0; i < running_.size() && step_budget_left_ > 0; ++i) {
    Sequence& sequence = *running_[i];
    if (sequence.uncached_tokens() == 1) continue;
    const int64_t count = std::min(sequence.uncached_tokens(), step_budget_left_);
    KVJIT_ASSIGN_OR_RETURN(bool reserved, ReserveForRunning(sequence, count));
    if (reserved) scheduled.push_back(&sequence);
  }
  // Then waiting sequences, in line order, while their first chunk fits.
  while (!waiting_.empty() && step_budget_left_ > 0 && !preempted_this_step_) {
    Sequence* next = waiting_.front();
    KVJIT_ASSIGN_OR_RETURN(bool admitted, AdmitWaiting());
    if (!admitted) break;
    scheduled.push_back(next);
  }
  return scheduled;
}

absl::StatusOr<StepInputs> BatchScheduler::PackStep(const std::vector<Sequence*>& scheduled) const {
  StepBuilder builder(blocks_);
  for (const Sequence* sequence : scheduled) {
    const int64_t first = sequence->cached_tokens;
    const int64_t drafted = static_cast<int64_t>(sequence->drafts.size());
    const absl::Span<const int32_t> fed =
        absl::MakeConstSpan(sequence->history).subspan(first, sequence->step_tokens - drafted);
    if (drafted > 0) {
      std::vector<int32_t> verified(fed.begin(), fed.end());
      verified.insert(verified.end(), sequence->drafts.begin(), sequence->drafts.end());
      KVJIT_RETURN_IF_ERROR(builder.AddSequence(sequence->id, verified, first, StepLogits::kEvery));
      continue;
    }
    KVJIT_RETURN_IF_ERROR(builder.AddSequence(
        sequence->id, fed, first,
        sequence->step_tokens == sequence->uncached_tokens() ? StepLogits::kLast : StepLogits::kNone));
  }
  return std::move(builder).Finish();
}

void BatchScheduler::UpdatePeakBlocks(const std::vector<Sequence*>& scheduled) {
  absl::flat_hash_set<const Request*> counted;
  std::vector<kv::SequenceId> samples;
  for (const Sequence* sequence : scheduled) {
    Request& request = *sequence->request;
    if (!counted.insert(&request).second) continue;
    samples.clear();
    for (const auto& sample : request.samples) samples.push_back(sample->id);
    request.metrics.peak_kv_blocks =
        std::max(request.metrics.peak_kv_blocks, blocks_.UsageOf(samples).distinct);
  }
}

void BatchScheduler::CompleteRequest(Request& request) {
  RequestResult result;
  RequestMetrics& metrics = request.metrics;
  double tpot_sum = 0;
  int64_t tpot_samples = 0;
  bool any_token = false;
  Clock::time_point first_token = Clock::time_point::max();
  for (const auto& sample : request.samples) {
    const int64_t generated = sample->generated_tokens();
    metrics.generated_tokens += generated;
    if (generated > 0) {
      any_token = true;
      first_token = std::min(first_token, sample->first_token);
    }
    if (generated > 1) {
      tpot_sum += SecondsBetween(sample->first_token, sample->last_token) / (generated - 1);
      ++tpot_samples;
    }
    result.samples.push_back(
        {std::vector<int32_t>(sample->history.begin() + request.prompt_tokens, sample->history.end()),
         sample->finish_reason});
  }
  // A request cancelled before its prompt's logits gets its other samples,
  // empty.
  while (static_cast<int64_t>(result.samples.size()) < request.num_samples) {
    result.samples.push_back({{}, FinishReason::kCancelled});
  }
  metrics.time_to_first_token_s = any_token ? SecondsBetween(request.submitted, first_token) : 0;
  metrics.time_per_output_token_s = tpot_samples > 0 ? tpot_sum / tpot_samples : 0;
  result.metrics = metrics;
  const RequestId id = request.id;
  results_[id] = std::move(result);
  unfinished_.erase(id);
}

absl::Status BatchScheduler::RemoveSample(Sequence& sequence, FinishReason reason) {
  auto waiting = std::find(waiting_.begin(), waiting_.end(), &sequence);
  if (waiting != waiting_.end()) {
    // A waiting sequence holds no blocks: it is new, or preemption freed them.
    waiting_.erase(waiting);
  } else {
    KVJIT_RETURN_IF_ERROR(NameRequest(sequence.request->id, blocks_.Free(sequence.id)));
    running_.erase(std::find(running_.begin(), running_.end(), &sequence));
  }
  sequence.finish_reason = reason;
  --sequence.request->unfinished_samples;
  if (options_.drafter == nullptr) return absl::OkStatus();
  return NameRequest(sequence.request->id, options_.drafter->Forget(sequence.id));
}

absl::Status BatchScheduler::FinishSample(Sequence& sequence, FinishReason reason) {
  KVJIT_RETURN_IF_ERROR(RemoveSample(sequence, reason));
  if (sequence.request->unfinished_samples == 0) CompleteRequest(*sequence.request);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<BatchScheduler::Sequence*>> BatchScheduler::ForkSamples(Sequence& first) {
  Request& request = *first.request;
  std::vector<Sequence*> forked;
  for (int64_t index = 1; index < request.num_samples; ++index) {
    sampling::SamplingParams params = request.params;
    params.seed += static_cast<uint64_t>(index);
    auto sampler = sampling::Sampler::Create(params);
    if (!sampler.ok()) return NameRequest(request.id, sampler.status());
    const kv::SequenceId id = next_sequence_id_++;
    KVJIT_RETURN_IF_ERROR(NameRequest(request.id, blocks_.Fork(first.id, id)));
    request.samples.push_back(std::make_unique<Sequence>(
        Sequence{id, &request, *std::move(sampler), first.history, first.cached_tokens}));
    // The first sample has taken no token yet: each starts the grammar anew.
    if (request.grammar) {
      request.samples.back()->grammar = request.grammar->NewMatcher(request.stop_token_ids);
    }
    forked.push_back(request.samples.back().get());
    running_.push_back(forked.back());
  }
  return forked;
}

FinishReason BatchScheduler::AppendToken(Sequence& sequence, int32_t token,
                                         absl::Span<const float> logits) {
  sequence.history.push_back(token);
  sequence.last_token = Clock::now();
  if (sequence.generated_tokens() == 1) sequence.first_token = sequence.last_token;
  bool observer_goes_on = true;
  if (token_observer_) {
    const Request& request = *sequence.request;
    const auto sample = std::find_if(request.samples.begin(), request.samples.end(),
                                     [&](const auto& s) { return s.get() == &sequence; });
    observer_goes_on = token_observer_(
        {request.id, static_cast<int64_t>(sample - request.samples.begin()), token, logits});
  }
  const auto& stops = sequence.request->stop_token_ids;
  if (std::find(stops.begin(), stops.end(), token) != stops.end()) return FinishReason::kEos;
  if (!observer_goes_on) return FinishReason::kStopped;
  if (sequence.generated_tokens() == sequence.request->max_new_tokens) return FinishReason::kLength;
  return FinishReason::kNone;
}

void BatchScheduler::CountVerification(Sequence& sequence, int64_t drafted, int64_t accepted) {
  sequence.draft_policy.Record(drafted, accepted);
  RequestMetrics& metrics = sequence.request->metrics;
  counters_.drafted_tokens += drafted;
  metrics.drafted_tokens += drafted;
  counters_.accepted_tokens += accepted;
  metrics.accepted_tokens += accepted;
  ++counters_.verify_steps;
  ++metrics.verify_steps;
}

absl::Status BatchScheduler::TakeStepTokens(Sequence& sequence, absl::Span<const float> rows) {
  const std::vector<int32_t> drafts = std::exchange(sequence.drafts, {});
  // The sample is finished only after its verification is counted: finishing
  // its request's last sample frees the request.
  FinishReason finish = FinishReason::kNone;
  KVJIT_ASSIGN_OR_RETURN(
      const VerifiedDrafts verified,
      TakeVerifiedTokens(rows, runner_.vocab_size(), drafts, sequence.sampler, sequence.history,
                         sequence.grammar ? &*sequence.grammar : nullptr,
                         [&](absl::Span<const float> row, int32_t token) -> absl::StatusOr<bool> {
                           finish = AppendToken(sequence, token, row);
                           return finish == FinishReason::kNone;
                         }));
  if (!drafts.empty()) CountVerification(sequence, static_cast<int64_t>(drafts.size()), verified.accepted);
  if (verified.grammar_ended) finish = FinishReason::kGrammarEnded;
  if (finish != FinishReason::kNone) return FinishSample(sequence, finish);
  if (drafts.empty()) return absl::OkStatus();
  // The rejected drafts' keys and values go: the cache ends where the newest
  // token, not in it yet, starts. Only then may the window release blocks.
  sequence.cached_tokens = static_cast<int64_t>(sequence.history.size()) - 1;
  KVJIT_RETURN_IF_ERROR(
      NameRequest(sequence.request->id, blocks_.Truncate(sequence.id, sequence.cached_tokens)));
  return NameRequest(sequence.request->id,
                     ReleaseBehindWindow(blocks_, sequence.id, runner_.attention_window()));
}

absl::Status BatchScheduler::ConsumeLogits(const std::vector<Sequence*>& scheduled,
                                           absl::Span<const float> logits) {
  const int64_t vocab = runner_.vocab_size();
  int64_t row = 0;
  for (Sequence* sequence : scheduled) {
    const int64_t drafted = static_cast<int64_t>(sequence->drafts.size());
    const int64_t fed_history = sequence->step_tokens - drafted;
    const bool ends_uncached = fed_history == sequence->uncached_tokens();
    sequence->cached_tokens += fed_history;
    sequence->step_tokens = 0;
    if (options_.enable_prefix_caching) {
      KVJIT_RETURN_IF_ERROR(NameRequest(
          sequence->request->id,
          blocks_.CacheFullBlocks(sequence->id, absl::MakeConstSpan(sequence->history)
                                                    .first(sequence->cached_tokens))));
    }
    // Behind a verify step's drafts the window moves once they are cut.
    if (drafted == 0) {
      KVJIT_RETURN_IF_ERROR(NameRequest(
          sequence->request->id,
          ReleaseBehindWindow(blocks_, sequence->id, runner_.attention_window())));
    }
    if (!ends_uncached) continue;
    const absl::Span<const float> rows = logits.subspan(row * vocab, (drafted + 1) * vocab);
    row += drafted + 1;
    std::vector<Sequence*> sampling = {sequence};
    const Request& request = *sequence->request;
    if (static_cast<int64_t>(request.samples.size()) < request.num_samples) {
      KVJIT_ASSIGN_OR_RETURN(std::vector<Sequence*> forked, ForkSamples(*sequence));
      sampling.insert(sampling.end(), forked.begin(), forked.end());
    }
    // The last of a request's samples to finish completes the request and
    // frees them all; none is touched after its own TakeStepTokens.
    for (Sequence* sample : sampling) KVJIT_RETURN_IF_ERROR(TakeStepTokens(*sample, rows));
  }
  return absl::OkStatus();
}

absl::StatusOr<BeamSearchResult> BatchScheduler::RunBeamSearch(
    const std::vector<int32_t>& prompt, const BeamSearchParams& params,
    const std::function<bool(int64_t)>& keep_going) {
  if (!Idle()) {
    return absl::FailedPreconditionError(
        absl::StrCat(params.request_id, ": beam search runs alone, and ", running_.size(),
                     " sequences are running and ", waiting_.size(), " waiting"));
  }
  BeamSearch search(runner_, blocks_, options_.context_length);
  return search.Search(prompt, params, keep_going);
}

absl::StatusOr<absl::Span<const float>> BatchScheduler::RunStep(
    const std::vector<Sequence*>& scheduled, const StepInputs& inputs) {
  std::vector<grammar::GrammarMatcher*> grammars;
  for (Sequence* sequence : scheduled) {
    if (sequence->grammar) grammars.push_back(&*sequence->grammar);
  }
  if (grammars.empty()) return runner_.Run(inputs);
  // The masks depend only on the tokens taken so far, which the step does
  // not change; the runner has the step's other threads.
  if (mask_worker_ == nullptr) mask_worker_ = std::make_unique<BackgroundWorker>();
  int64_t computed = 0;
  double seconds = 0;
  mask_worker_->Start([&grammars, &computed, &seconds] {
    const Clock::time_point start = Clock::now();
    for (grammar::GrammarMatcher* matcher : grammars) computed += matcher->PrepareAllowedTokens();
    seconds = SecondsBetween(start, Clock::now());
  });
  absl::StatusOr<absl::Span<const float>> logits = runner_.Run(inputs);
  const Clock::time_point ran = Clock::now();
  mask_worker_->Wait();
  counters_.grammar_wait_seconds += SecondsBetween(ran, Clock::now());
  counters_.grammar_mask_seconds += seconds;
  counters_.grammar_masks += computed;
  return logits;
}

absl::Status BatchScheduler::Step() {
  if (Idle()) return absl::OkStatus();
  const Clock::time_point start = Clock::now();
  KVJIT_ASSIGN_OR_RETURN(std::vector<Sequence*> scheduled, ScheduleStep());
  if (scheduled.empty()) {
    return absl::InternalError(absl::StrCat("no sequence of ", running_.size(), " running and ",
                                            waiting_.size(), " waiting could be scheduled"));
  }
  for (const kv::BlockCopy& copy : blocks_.TakePendingCopies()) {
    KVJIT_RETURN_IF_ERROR(runner_.CopyBlock(copy.source, copy.destination));
  }
  UpdatePeakBlocks(scheduled);
  KVJIT_ASSIGN_OR_RETURN(StepInputs inputs, PackStep(scheduled));
  KVJIT_ASSIGN_OR_RETURN(absl::Span<const float> logits, RunStep(scheduled, inputs));
  const size_t expected = inputs.logits_rows().size() * static_cast<size_t>(runner_.vocab_size());
  if (logits.size() != expected) {
    return absl::InternalError(absl::StrCat("the runner returned ", logits.size(), " logits for ",
                                            inputs.logits_rows().size(), " rows of ",
                                            runner_.vocab_size()));
  }
  ++counters_.steps;
  counters_.computed_tokens += static_cast<int64_t>(inputs.tokens().size());
  KVJIT_RETURN_IF_ERROR(ConsumeLogits(scheduled, logits));
  // Every token yields logits only when each is a sequence's next (or a
  // prompt's last, alone in its chunk).
  if (inputs.tokens().size() == inputs.logits_rows().size()) {
    ++counters_.decode_steps;
    counters_.decode_step_tokens += static_cast<int64_t>(inputs.tokens().size());
    counters_.decode_step_seconds += std::chrono::duration<double>(Clock::now() - start).count();
  }
  return absl::OkStatus();
}

}  // namespace kvjit::runtime
