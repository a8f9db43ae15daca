#ifndef KVJIT_TOOLS_SERVE_SERVERMETRICS_H_
#define KVJIT_TOOLS_SERVE_SERVERMETRICS_H_

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace kvjit::serve {

// A Prometheus histogram: counts of observations at or below each bound,
// their sum and their number.
class Histogram {
 public:
  // `bounds` ascending; +Inf is added.
  explicit Histogram(std::vector<double> bounds);
  void Observe(double value);
  // The `# HELP`, `# TYPE` and sample lines of the histogram `name`.
  void AppendPrometheus(const std::string& name, const std::string& help, std::string* out) const;

 private:
  std::vector<double> bounds_;
  std::vector<int64_t> counts_;  // per bucket, not cumulative; the last is +Inf
  double sum_ = 0;
  int64_t count_ = 0;
};

// What the scheduler thread publishes after each step: the scheduler's load
// and KV pool, and its totals since the server started.
struct SchedulerGauges {
  int64_t requests_running = 0;  // generating: they have their first token
  int64_t requests_waiting = 0;  // queued or prefilling: no token yet
  int64_t kv_blocks_total = 0;
  int64_t kv_blocks_used = 0;    // held by a sequence
  int64_t kv_blocks_free = 0;    // cached blocks no sequence holds count as free
  int64_t kv_blocks_shared = 0;  // held by more than one sequence
  int64_t kv_blocks_cached = 0;  // free, but kept for the prefix cache
  int64_t preemptions = 0;
  int64_t prefix_cache_hit_tokens = 0;
  int64_t computed_tokens = 0;  // prompts, recomputes and decodes the steps ran
  int64_t steps = 0;
  // Speculative decoding: sequences' verifications of drafts, the tokens
  // drafted and those accepted.
  int64_t spec_decode_drafts = 0;
  int64_t spec_decode_draft_tokens = 0;
  int64_t spec_decode_accepted_tokens = 0;
};

// The timings of a request that finished, in seconds from its arrival.
struct FinishedRequest {
  std::optional<double> time_to_first_token_s;   // none when it generated nothing
  std::optional<double> time_per_output_token_s;  // none below two tokens
  double end_to_end_s = 0;
  int64_t prompt_tokens = 0;
  int64_t generated_tokens = 0;
};

// The server's metrics, rendered for GET /metrics in Prometheus' text
// format. Safe to use from any thread.
class ServerMetrics {
 public:
  ServerMetrics();

  void RecordFinished(const FinishedRequest& request);
  // A request its client abandoned before it finished.
  void CountCancelled();
  // A request the scheduler thread could not run (after it was queued).
  void CountFailed();
  // A request refused because the queue was full.
  void CountRejected();
  void SetSchedulerGauges(const SchedulerGauges& gauges);

  std::string RenderPrometheus() const;

 private:
  mutable std::mutex mutex_;
  Histogram time_to_first_token_;
  Histogram time_per_output_token_;
  Histogram end_to_end_;
  SchedulerGauges gauges_;
  int64_t finished_ = 0;
  int64_t cancelled_ = 0;
  int64_t failed_ = 0;
  int64_t rejected_ = 0;
  int64_t prompt_tokens_ = 0;
  int64_t generated_tokens_ = 0;
};

}  // namespace kvjit::serve

#endif  // KVJIT_TOOLS_SERVE_SERVERMETRICS_H_
