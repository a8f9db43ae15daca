#include "tools/serve/SchedulerThread.h"

#include <algorithm>
#include <cstdio>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "runtime/core/StatusMacros.h"

namespace kvjit::serve {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsBetween(Clock::time_point start, Clock::time_point end) {
  return std::chrono::duration<double>(end - start).count();
}

// The scheduler's and beam search's errors, as the client should get them:
// without the scheduler's own request number (which the client never saw),
// and a request that could never fit the KV pool is the request's fault
// (400), not a full queue (429, which invites a retry).
absl::Status ForClient(const absl::Status& status) {
  absl::string_view message = status.message();
  if (absl::ConsumePrefix(&message, "request ")) {
    const size_t digits = message.find_first_not_of("0123456789");
    if (digits != 0 && digits != absl::string_view::npos &&
        absl::StartsWith(message.substr(digits), ": ")) {
      message.remove_prefix(digits + 2);
    } else {
      message = status.message();
    }
  }
  const absl::StatusCode code = status.code() == absl::StatusCode::kResourceExhausted
                                    ? absl::StatusCode::kInvalidArgument
                                    : status.code();
  return absl::Status(code, message);
}

}  // namespace

absl::StatusOr<std::unique_ptr<SchedulerThread>> SchedulerThread::Start(
    runtime::StepRunner& runner, const TextCodec& codec, const SchedulerThreadOptions& options,
    ServerMetrics& metrics) {
  runtime::BatchSchedulerOptions scheduler_options;
  scheduler_options.max_batch_tokens = options.max_batch_tokens;
  scheduler_options.context_length = options.context_length;
  scheduler_options.enable_prefix_caching = options.enable_prefix_caching;
  scheduler_options.drafter = options.drafter;
  scheduler_options.draft_tokens = options.draft_tokens;
  scheduler_options.speculation_max_batch = options.speculation_max_batch;
  KVJIT_ASSIGN_OR_RETURN(runtime::BatchScheduler scheduler,
                         runtime::BatchScheduler::Create(runner, scheduler_options));
  std::unique_ptr<SchedulerThread> started(
      new SchedulerThread(codec, options, metrics, std::move(scheduler)));
  started->PublishGauges();
  started->thread_ = std::thread([raw = started.get()] { raw->Loop(); });
  return started;
}

SchedulerThread::SchedulerThread(const TextCodec& codec, const SchedulerThreadOptions& options,
                                 ServerMetrics& metrics, runtime::BatchScheduler scheduler)
    : codec_(codec), options_(options), metrics_(metrics), scheduler_(std::move(scheduler)) {
  scheduler_.SetTokenObserver([this](const runtime::SampledToken& token) { return OnToken(token); });
}

SchedulerThread::~SchedulerThread() { Stop(); }

void SchedulerThread::Stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  work_.notify_all();
  if (thread_.joinable()) thread_.join();
}

absl::StatusOr<std::shared_ptr<RequestStream>> SchedulerThread::Submit(TokenizedRequest request) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (stopping_) return absl::UnavailableError("the server is shutting down");
  if (waiting_.load() >= options_.max_queued) {
    metrics_.CountRejected();
    return absl::ResourceExhaustedError(absl::StrCat(
        "the server has ", waiting_.load(), " requests waiting to start, its limit "
        "(--max_queued); retry later"));
  }
  auto stream = std::make_shared<RequestStream>();
  submitted_.push_back({std::move(request), stream});
  ++waiting_;
  work_.notify_one();
  return stream;
}

void SchedulerThread::Loop() {
  while (true) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      work_.wait(lock, [this] {
        return stopping_ || !submitted_.empty() || !queue_.empty() || !scheduler_.Idle();
      });
      if (stopping_) break;
      for (Queued& queued : submitted_) queue_.push_back(std::move(queued));
      submitted_.clear();
    }
    AdmitQueued();
    CancelAbandoned();
    if (!scheduler_.Idle()) {
      StepScheduler();
    } else if (!queue_.empty()) {
      // AdmitQueued stops at a beam search; the batch has drained for it.
      Queued beam = std::move(queue_.front());
      queue_.pop_front();
      RunBeamSearch(std::move(beam));
    }
    CompleteFinished();
    PublishGauges();
  }
  const absl::Status stopping = absl::UnavailableError("the server is shutting down");
  FailRunning(stopping);
  std::lock_guard<std::mutex> lock(mutex_);
  for (std::deque<Queued>* line : {&queue_, &submitted_}) {
    for (Queued& queued : *line) queued.stream->Fail(stopping);
    line->clear();
  }
}

void SchedulerThread::AdmitQueued() {
  while (!queue_.empty() && !queue_.front().request.beam_search.has_value()) {
    Queued queued = std::move(queue_.front());
    queue_.pop_front();
    if (queued.stream->cancelled()) {
      Started();
      metrics_.CountCancelled();
      continue;
    }
    Admit(std::move(queued));
  }
}

void SchedulerThread::Admit(Queued queued) {
  TokenizedRequest& request = queued.request;
  Running running{std::move(request), std::move(queued.stream), {}, 0, std::nullopt};
  const TokenizedRequest& admitted = running.request;
  for (int64_t i = 0; i < admitted.num_choices; ++i) {
    auto choice = ChoiceOutput::Create(codec_, admitted.stop, admitted.top_logprobs);
    if (!choice.ok()) {
      Started();
      metrics_.CountFailed();
      running.stream->Fail(choice.status());
      return;
    }
    running.choices.push_back(*std::move(choice));
  }
  running.unfinished_choices = admitted.num_choices;
  absl::StatusOr<runtime::RequestId> id =
      scheduler_.Submit(admitted.prompt, admitted.sampling, admitted.stop.max_tokens.value_or(1),
                        admitted.stop.stop_token_ids, admitted.num_choices, admitted.grammar);
  if (!id.ok()) {
    Started();
    metrics_.CountFailed();
    running.stream->Fail(ForClient(id.status()));
    return;
  }
  running.stream->MarkAccepted();
  running_.emplace(*id, std::move(running));
}

void SchedulerThread::RunBeamSearch(Queued queued) {
  const TokenizedRequest& request = queued.request;
  RequestStream& stream = *queued.stream;
  if (stream.cancelled()) {
    Started();
    metrics_.CountCancelled();
    return;
  }
  bool accepted = false;
  absl::StatusOr<runtime::BeamSearchResult> result = scheduler_.RunBeamSearch(
      request.prompt, *request.beam_search, [&](int64_t) {
        // Called once the prompt is in: the search has passed its checks.
        if (!accepted) stream.MarkAccepted();
        accepted = true;
        return !stream.cancelled() && !stopping_;
      });
  Started();
  if (!result.ok()) {
    if (stream.cancelled()) {
      metrics_.CountCancelled();
    } else {
      metrics_.CountFailed();
      stream.Fail(ForClient(result.status()));
    }
    return;
  }
  RequestUsage usage;
  usage.prompt_tokens = static_cast<int64_t>(request.prompt.size());
  for (size_t i = 0; i < result->hypotheses.size(); ++i) {
    const std::vector<int32_t>& tokens = result->hypotheses[i].tokens;
    usage.completion_tokens += static_cast<int64_t>(tokens.size());
    auto output = ChoiceOutput::Create(codec_, request.stop, std::nullopt);
    if (!output.ok()) {
      stream.Fail(output.status());
      return;
    }
    ChoiceDelta choice;
    choice.index = static_cast<int64_t>(i);
    for (int32_t token : tokens) {
      ChoiceDelta delta = (*output)->Append(token, {});
      choice.text += delta.text;
      if (delta.finish) choice.finish = delta.finish;
    }
    if (!choice.finish) {
      ChoiceDelta rest = (*output)->Close();
      choice.text += rest.text;
      choice.finish = rest.finish;
    }
    stream.Push(std::move(choice));
  }
  const double seconds = SecondsBetween(request.arrival, Clock::now());
  metrics_.RecordFinished({seconds, std::nullopt, seconds, usage.prompt_tokens,
                           usage.completion_tokens});
  stream.Complete(usage);
}

void SchedulerThread::CancelAbandoned() {
  std::vector<runtime::RequestId> abandoned;
  for (const auto& [id, running] : running_) {
    if (running.stream->cancelled()) abandoned.push_back(id);
  }
  for (runtime::RequestId id : abandoned) {
    // Cancel frees the request's blocks; its partial result is not wanted.
    absl::Status cancelled = scheduler_.Cancel(id);
    if (cancelled.ok()) cancelled = scheduler_.TakeResult(id).status();
    if (!cancelled.ok()) std::fprintf(stderr, "kvjit serve: %s\n", cancelled.ToString().c_str());
    if (!running_.at(id).first_token) Started();
    metrics_.CountCancelled();
    running_.erase(id);
  }
}

void SchedulerThread::StepScheduler() {
  const absl::Status stepped = scheduler_.Step();
  if (stepped.ok()) return;
  std::fprintf(stderr, "kvjit serve: a step failed, failing its %zu requests: %s\n",
               running_.size(), stepped.ToString().c_str());
  FailRunning(absl::InternalError(absl::StrCat("the engine's step failed: ", stepped.message())));
}

bool SchedulerThread::OnToken(const runtime::SampledToken& token) {
  auto it = running_.find(token.request);
  if (it == running_.end()) return true;
  Running& running = it->second;
  if (!running.first_token) {
    running.first_token = Clock::now();
    Started();
  }
  ChoiceOutput& choice = *running.choices[token.sample_index];
  ChoiceDelta delta = choice.Append(token.token, token.logits);
  delta.index = token.sample_index;
  const bool goes_on = !delta.finish.has_value();
  if (!goes_on) --running.unfinished_choices;
  if (!delta.text.empty() || !delta.logprobs.empty() || delta.finish) {
    running.stream->Push(std::move(delta));
  }
  return goes_on;
}

void SchedulerThread::CompleteFinished() {
  std::vector<runtime::RequestId> finished;
  for (const auto& [id, running] : running_) {
    if (running.unfinished_choices == 0 || scheduler_.Idle()) finished.push_back(id);
  }
  for (runtime::RequestId id : finished) {
    absl::StatusOr<runtime::RequestResult> result = scheduler_.TakeResult(id);
    if (!result.ok()) continue;  // the scheduler still runs one of its samples
    Complete(running_.at(id), *result);
    running_.erase(id);
  }
}

void SchedulerThread::Complete(Running& running, const runtime::RequestResult& result) {
  // A choice the context cut short, or its grammar ended, ended without a
  // stop decision.
  for (size_t i = 0; i < running.choices.size(); ++i) {
    if (running.choices[i]->finished()) continue;
    const bool grammar_ended = i < result.samples.size() &&
                               result.samples[i].finish_reason == runtime::FinishReason::kGrammarEnded;
    ChoiceDelta rest =
        running.choices[i]->Close(grammar_ended ? ChoiceFinish::kStop : ChoiceFinish::kLength);
    rest.index = static_cast<int64_t>(i);
    running.stream->Push(std::move(rest));
  }
  if (!running.first_token) Started();
  const runtime::RequestMetrics& m = result.metrics;
  const Clock::time_point now = Clock::now();
  FinishedRequest finished;
  if (running.first_token) {
    finished.time_to_first_token_s = SecondsBetween(running.request.arrival, *running.first_token);
  }
  if (m.time_per_output_token_s > 0) finished.time_per_output_token_s = m.time_per_output_token_s;
  finished.end_to_end_s = SecondsBetween(running.request.arrival, now);
  finished.prompt_tokens = m.prompt_tokens;
  finished.generated_tokens = m.generated_tokens;
  metrics_.RecordFinished(finished);
  RequestUsage usage{m.prompt_tokens, m.generated_tokens,
                     std::min(m.prefix_cached_tokens, m.prompt_tokens), std::nullopt};
  if (running.first_token) {
    usage.timings = RequestTimings{*finished.time_to_first_token_s,
                                   SecondsBetween(*running.first_token, now),
                                   finished.time_per_output_token_s};
  }
  running.stream->Complete(usage);
}

void SchedulerThread::FailRunning(const absl::Status& error) {
  for (auto& [id, running] : running_) {
    (void)scheduler_.Cancel(id);
    (void)scheduler_.TakeResult(id);
    if (!running.first_token) Started();
    metrics_.CountFailed();
    running.stream->Fail(error);
  }
  running_.clear();
}

void SchedulerThread::PublishGauges() {
  SchedulerGauges gauges;
  gauges.requests_waiting = waiting_.load();
  for (const auto& [id, running] : running_) gauges.requests_running += running.first_token ? 1 : 0;
  const kv::KvBlockManager& blocks = scheduler_.kv_blocks();
  const kv::KvBlockCounters counters = blocks.counters();
  gauges.kv_blocks_total = blocks.num_blocks();
  gauges.kv_blocks_used = counters.blocks_in_use;
  gauges.kv_blocks_free = blocks.num_free_blocks();
  gauges.kv_blocks_shared = counters.blocks_shared;
  gauges.kv_blocks_cached = counters.blocks_cached;
  gauges.prefix_cache_hit_tokens = counters.prefix_hit_tokens;
  const runtime::SchedulerCounters& work = scheduler_.counters();
  gauges.preemptions = work.preemptions;
  gauges.computed_tokens = work.computed_tokens;
  gauges.steps = work.steps;
  gauges.spec_decode_drafts = work.verify_steps;
  gauges.spec_decode_draft_tokens = work.drafted_tokens;
  gauges.spec_decode_accepted_tokens = work.accepted_tokens;
  metrics_.SetSchedulerGauges(gauges);
}

}  // namespace kvjit::serve
