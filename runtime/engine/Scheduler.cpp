#include "runtime/engine/Scheduler.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "runtime/core/StatusMacros.h"
#include "runtime/engine/StepBuilder.h"

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

absl::StatusOr<BatchScheduler> BatchScheduler::Create(StepRunner& runner,
                                                      const BatchSchedulerOptions& options) {
  if (options.max_batch_tokens < 1 || options.max_batch_tokens > runner.max_tokens_per_step()) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_batch_tokens must be 1 to the program's ", runner.max_tokens_per_step(),
                     " tokens per step, got ", options.max_batch_tokens));
  }
  if (options.context_length < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the context must hold a prompt token and a generated one, got ", options.context_length));
  }
  KVJIT_ASSIGN_OR_RETURN(kv::KvBlockManager blocks,
                         kv::KvBlockManager::Create(static_cast<int32_t>(runner.num_blocks()),
                                                    static_cast<int32_t>(runner.block_size())));
  return BatchScheduler(runner, options, std::move(blocks));
}

absl::StatusOr<RequestId> BatchScheduler::Submit(std::vector<int32_t> prompt,
                                                 sampling::SamplingParams params,
                                                 int64_t max_new_tokens,
                                                 std::vector<int32_t> stop_token_ids) {
  const RequestId id = next_id_++;
  const int64_t prompt_tokens = static_cast<int64_t>(prompt.size());
  if (prompt_tokens == 0) {
    return absl::InvalidArgumentError(absl::StrCat("request ", id, ": the prompt has no tokens"));
  }
  if (prompt_tokens >= options_.context_length) {
    return absl::OutOfRangeError(absl::StrCat("request ", id, ": the prompt's ", prompt_tokens,
                                              " tokens leave no room in the context of ",
                                              options_.context_length));
  }
  if (max_new_tokens < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("request ", id, ": max_new_tokens must be at least 1, got ", max_new_tokens));
  }
  max_new_tokens = std::min(max_new_tokens, options_.context_length - prompt_tokens);
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

  RequestMetrics metrics;
  metrics.prompt_tokens = prompt_tokens;
  const Clock::time_point now = Clock::now();
  auto request = std::make_unique<Request>(Request{id, prompt_tokens, max_new_tokens,
                                                   std::move(stop_token_ids), *std::move(sampler),
                                                   std::move(prompt), /*cached_tokens=*/0,
                                                   /*step_tokens=*/0, now, now, now, metrics});
  waiting_.push_back(std::move(request));
  results_.emplace(id, std::nullopt);
  return id;
}

absl::StatusOr<RequestResult> BatchScheduler::TakeResult(RequestId id) {
  auto it = results_.find(id);
  if (it == results_.end()) {
    return absl::NotFoundError(absl::StrCat("request ", id, " is unknown or its result was taken"));
  }
  if (!it->second.has_value()) {
    return absl::UnavailableError(absl::StrCat("request ", id, " has not finished"));
  }
  RequestResult result = *std::move(it->second);
  results_.erase(it);
  return result;
}

absl::Status BatchScheduler::Preempt(size_t index) {
  Request& request = *running_[index];
  KVJIT_RETURN_IF_ERROR(NameRequest(request.id, blocks_.Free(request.id)));
  request.cached_tokens = 0;
  ++request.metrics.preemptions;
  waiting_.push_front(std::move(running_[index]));
  running_.erase(running_.begin() + static_cast<std::ptrdiff_t>(index));
  preempted_this_step_ = true;
  return absl::OkStatus();
}

absl::StatusOr<bool> BatchScheduler::ReserveForRunning(Request& request, int64_t count) {
  while (true) {
    KVJIT_ASSIGN_OR_RETURN(int64_t needed, blocks_.BlocksNeeded(request.id, count));
    if (needed <= blocks_.num_free_blocks()) break;
    // The newest running request that is not in the step; requests in the
    // step are never taken back, so the step built so far stays valid.
    size_t victim = running_.size();
    for (size_t i = running_.size(); i-- > 0 && running_[i].get() != &request;) {
      if (running_[i]->step_tokens == 0) {
        victim = i;
        break;
      }
    }
    if (victim == running_.size()) return false;
    KVJIT_RETURN_IF_ERROR(Preempt(victim));
  }
  KVJIT_RETURN_IF_ERROR(AddToStep(request, count));
  return true;
}

absl::Status BatchScheduler::AddToStep(Request& request, int64_t count) {
  KVJIT_RETURN_IF_ERROR(NameRequest(request.id, blocks_.Reserve(request.id, count)));
  request.step_tokens = count;
  step_budget_left_ -= count;
  const kv::BlockTable* table = blocks_.FindSequence(request.id);
  request.metrics.peak_kv_blocks =
      std::max(request.metrics.peak_kv_blocks, static_cast<int32_t>(table->blocks.size()));
  return absl::OkStatus();
}

absl::StatusOr<std::vector<BatchScheduler::Request*>> BatchScheduler::ScheduleStep() {
  step_budget_left_ = options_.max_batch_tokens;
  preempted_this_step_ = false;
  for (auto& request : running_) request->step_tokens = 0;
  std::vector<Request*> scheduled;

  // Decodes first, oldest first, so a long prefill never stalls them. A
  // decode that finds no request newer than itself to preempt is the newest
  // running request, and gives up its own blocks.
  for (size_t i = 0; i < running_.size() && step_budget_left_ > 0; ++i) {
    Request& request = *running_[i];
    if (request.uncached_tokens() != 1) continue;
    KVJIT_ASSIGN_OR_RETURN(bool reserved, ReserveForRunning(request, 1));
    if (!reserved) {
      KVJIT_RETURN_IF_ERROR(Preempt(i));
      break;
    }
    scheduled.push_back(&request);
  }
  // Then the prompts already under way: one without a block to grow into
  // waits for the decodes in the step to finish and free theirs.
  for (size_t i = 0; i < running_.size() && step_budget_left_ > 0; ++i) {
    Request& request = *running_[i];
    if (request.uncached_tokens() == 1) continue;
    const int64_t count = std::min(request.uncached_tokens(), step_budget_left_);
    KVJIT_ASSIGN_OR_RETURN(bool reserved, ReserveForRunning(request, count));
    if (reserved) scheduled.push_back(&request);
  }
  // Then new requests, in line order, while their first chunk fits.
  while (!waiting_.empty() && step_budget_left_ > 0 && !preempted_this_step_) {
    Request& request = *waiting_.front();
    const int64_t count = std::min(request.uncached_tokens(), step_budget_left_);
    KVJIT_ASSIGN_OR_RETURN(int64_t needed, blocks_.BlocksNeeded(request.id, count));
    if (needed > blocks_.num_free_blocks()) break;
    running_.push_back(std::move(waiting_.front()));
    waiting_.pop_front();
    KVJIT_RETURN_IF_ERROR(AddToStep(request, count));
    scheduled.push_back(&request);
  }
  return scheduled;
}

absl::StatusOr<StepInputs> BatchScheduler::PackStep(const std::vector<Request*>& scheduled) const {
  StepBuilder builder(blocks_);
  for (const Request* request : scheduled) {
    const int64_t first = request->cached_tokens;
    KVJIT_RETURN_IF_ERROR(builder.AddSequence(
        request->id, absl::MakeConstSpan(request->history).subspan(first, request->step_tokens),
        first, /*wants_logits=*/request->step_tokens == request->uncached_tokens()));
  }
  return std::move(builder).Finish();
}

absl::Status BatchScheduler::Finish(Request& request, sampling::StopReason reason) {
  KVJIT_RETURN_IF_ERROR(NameRequest(request.id, blocks_.Free(request.id)));
  RequestMetrics& metrics = request.metrics;
  metrics.generated_tokens = request.generated_tokens();
  metrics.time_to_first_token_s = SecondsBetween(request.submitted, request.first_token);
  metrics.time_per_output_token_s =
      metrics.generated_tokens > 1
          ? SecondsBetween(request.first_token, request.last_token) / (metrics.generated_tokens - 1)
          : 0;
  RequestResult result;
  result.tokens.assign(request.history.begin() + request.prompt_tokens, request.history.end());
  result.finish_reason = reason;
  result.metrics = metrics;
  results_[request.id] = std::move(result);
  auto it = std::find_if(running_.begin(), running_.end(),
                         [&](const std::unique_ptr<Request>& r) { return r.get() == &request; });
  running_.erase(it);
  return absl::OkStatus();
}

absl::Status BatchScheduler::ConsumeLogits(const std::vector<Request*>& scheduled,
                                           absl::Span<const float> logits) {
  const int64_t vocab = runner_.vocab_size();
  int64_t row = 0;
  for (Request* request : scheduled) {
    const bool ends_uncached = request->step_tokens == request->uncached_tokens();
    request->cached_tokens += request->step_tokens;
    request->step_tokens = 0;
    if (!ends_uncached) continue;
    const int32_t token =
        request->sampler.Sample(logits.subspan(row++ * vocab, vocab), request->history);
    request->history.push_back(token);
    request->last_token = Clock::now();
    if (request->generated_tokens() == 1) request->first_token = request->last_token;
    const auto& stops = request->stop_token_ids;
    if (std::find(stops.begin(), stops.end(), token) != stops.end()) {
      KVJIT_RETURN_IF_ERROR(Finish(*request, sampling::StopReason::kEos));
    } else if (request->generated_tokens() == request->max_new_tokens) {
      KVJIT_RETURN_IF_ERROR(Finish(*request, sampling::StopReason::kLength));
    }
  }
  return absl::OkStatus();
}

absl::Status BatchScheduler::Step() {
  if (Idle()) return absl::OkStatus();
  KVJIT_ASSIGN_OR_RETURN(std::vector<Request*> scheduled, ScheduleStep());
  if (scheduled.empty()) {
    return absl::InternalError(absl::StrCat("no request of ", running_.size(), " running and ",
                                            waiting_.size(), " waiting could be scheduled"));
  }
  KVJIT_ASSIGN_OR_RETURN(StepInputs inputs, PackStep(scheduled));
  KVJIT_ASSIGN_OR_RETURN(absl::Span<const float> logits, runner_.Run(inputs));
  return ConsumeLogits(scheduled, logits);
}

}  // namespace kvjit::runtime
