#include "tools/serve/ServerMetrics.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace kvjit::serve {
namespace {

void AppendMetric(const std::string& name, const char* type, const std::string& help,
                  int64_t value, std::string* out) {
  absl::StrAppend(out, "# HELP ", name, " ", help, "\n# TYPE ", name, " ", type, "\n", name, " ",
                  value, "\n");
}

// Bucket bounds in seconds, reaching below vLLM's: a small model on a CPU
// answers in microseconds per token.
std::vector<double> LatencyBounds() {
  return {0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5,
          0.75,   1.0,    2.5,   5.0,    7.5,   10.0, 20.0,  40.0, 80.0,  160.0, 640.0};
}

}  // namespace

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::Observe(double value) {
  const size_t bucket =
      std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin();
  ++counts_[bucket];
  sum_ += value;
  ++count_;
}

void Histogram::AppendPrometheus(const std::string& name, const std::string& help,
                                 std::string* out) const {
  absl::StrAppend(out, "# HELP ", name, " ", help, "\n# TYPE ", name, " histogram\n");
  int64_t cumulative = 0;
  for (size_t i = 0; i < counts_.size(); ++i) {
    cumulative += counts_[i];
    const std::string bound = i < bounds_.size() ? absl::StrCat(bounds_[i]) : "+Inf";
    absl::StrAppend(out, name, "_bucket{le=\"", bound, "\"} ", cumulative, "\n");
  }
  absl::StrAppend(out, name, "_sum ", sum_, "\n", name, "_count ", count_, "\n");
}

ServerMetrics::ServerMetrics()
    : time_to_first_token_(LatencyBounds()),
      time_per_output_token_(LatencyBounds()),
      end_to_end_(LatencyBounds()) {}

void ServerMetrics::RecordFinished(const FinishedRequest& request) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (request.time_to_first_token_s) time_to_first_token_.Observe(*request.time_to_first_token_s);
  if (request.time_per_output_token_s) {
    time_per_output_token_.Observe(*request.time_per_output_token_s);
  }
  end_to_end_.Observe(request.end_to_end_s);
  ++finished_;
  prompt_tokens_ += request.prompt_tokens;
  generated_tokens_ += request.generated_tokens;
}

void ServerMetrics::CountCancelled() {
  std::lock_guard<std::mutex> lock(mutex_);
  ++cancelled_;
}

void ServerMetrics::CountFailed() {
  std::lock_guard<std::mutex> lock(mutex_);
  ++failed_;
}

void ServerMetrics::CountRejected() {
  std::lock_guard<std::mutex> lock(mutex_);
  ++rejected_;
}

void ServerMetrics::SetSchedulerGauges(const SchedulerGauges& gauges) {
  std::lock_guard<std::mutex> lock(mutex_);
  gauges_ = gauges;
}

std::string ServerMetrics::RenderPrometheus() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::string out;
  time_to_first_token_.AppendPrometheus("kvjit_time_to_first_token_seconds",
                                        "From arrival to the first generated token.", &out);
  time_per_output_token_.AppendPrometheus(
      "kvjit_time_per_output_token_seconds",
      "Mean time between a request's later tokens (over its choices).", &out);
  end_to_end_.AppendPrometheus("kvjit_e2e_request_latency_seconds",
                               "From arrival to the last token.", &out);
  const SchedulerGauges& g = gauges_;
  AppendMetric("kvjit_num_requests_running", "gauge", "Requests generating tokens.",
               g.requests_running, &out);
  AppendMetric("kvjit_num_requests_waiting", "gauge",
               "Requests queued or prefilling, without a token yet.", g.requests_waiting, &out);
  AppendMetric("kvjit_kv_blocks_total", "gauge", "Blocks in the paged KV pool.",
               g.kv_blocks_total, &out);
  AppendMetric("kvjit_kv_blocks_used", "gauge", "KV blocks held by a sequence.",
               g.kv_blocks_used, &out);
  AppendMetric("kvjit_kv_blocks_free", "gauge",
               "KV blocks no sequence holds (cached ones included).", g.kv_blocks_free, &out);
  AppendMetric("kvjit_kv_blocks_shared", "gauge", "KV blocks held by more than one sequence.",
               g.kv_blocks_shared, &out);
  AppendMetric("kvjit_kv_blocks_cached", "gauge",
               "Free KV blocks whose contents the prefix cache keeps.", g.kv_blocks_cached, &out);
  AppendMetric("kvjit_num_preemptions_total", "counter",
               "Sequences whose blocks were taken back, to be recomputed.", g.preemptions, &out);
  AppendMetric("kvjit_prefix_cache_hit_tokens_total", "counter",
               "Prompt tokens whose keys and values came from the prefix cache.",
               g.prefix_cache_hit_tokens, &out);
  AppendMetric("kvjit_computed_tokens_total", "counter",
               "Tokens the steps processed: prompts, recomputes and decodes.", g.computed_tokens,
               &out);
  AppendMetric("kvjit_engine_steps_total", "counter", "Steps the scheduler ran.", g.steps, &out);
  // Named as vLLM names them, so that its dashboards read ours.
  AppendMetric("kvjit_spec_decode_num_drafts_total", "counter",
               "Speculative decoding: a sequence's drafts verified in a step.",
               g.spec_decode_drafts, &out);
  AppendMetric("kvjit_spec_decode_num_draft_tokens_total", "counter",
               "Speculative decoding: tokens drafted.", g.spec_decode_draft_tokens, &out);
  AppendMetric("kvjit_spec_decode_num_accepted_tokens_total", "counter",
               "Speculative decoding: drafted tokens the model accepted.",
               g.spec_decode_accepted_tokens, &out);
  AppendMetric("kvjit_prompt_tokens_total", "counter", "Prompt tokens of finished requests.",
               prompt_tokens_, &out);
  AppendMetric("kvjit_generation_tokens_total", "counter",
               "Tokens generated for finished requests.", generated_tokens_, &out);
  AppendMetric("kvjit_requests_finished_total", "counter", "Requests that ran to their end.",
               finished_, &out);
  AppendMetric("kvjit_requests_cancelled_total", "counter",
               "Requests whose client went away before their end.", cancelled_, &out);
  AppendMetric("kvjit_requests_failed_total", "counter",
               "Queued requests the engine could not run.", failed_, &out);
  AppendMetric("kvjit_requests_rejected_total", "counter",
               "Requests refused with 429 because the queue was full.", rejected_, &out);
  return out;
}

}  // namespace kvjit::serve
