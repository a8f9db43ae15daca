// /metrics in Prometheus' text format: cumulative histogram buckets, and
// each gauge and counter the scheduler thread publishes.

#include "tools/serve/ServerMetrics.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvjit::serve {
namespace {

using ::testing::HasSubstr;

TEST(HistogramTest, BucketsAreCumulativeAndEndWithInf) {
  Histogram histogram({0.1, 1.0});
  for (double value : {0.05, 0.1, 0.5, 3.0}) histogram.Observe(value);
  std::string out;
  histogram.AppendPrometheus("h_seconds", "help text", &out);
  EXPECT_EQ(out,
            "# HELP h_seconds help text\n# TYPE h_seconds histogram\n"
            "h_seconds_bucket{le=\"0.1\"} 2\nh_seconds_bucket{le=\"1\"} 3\n"
            "h_seconds_bucket{le=\"+Inf\"} 4\nh_seconds_sum 3.65\nh_seconds_count 4\n");
}

TEST(ServerMetricsTest, RendersRequestsLatenciesAndTheKvPool) {
  ServerMetrics metrics;
  metrics.RecordFinished({0.02, 0.001, 0.5, 10, 7});
  metrics.CountCancelled();
  metrics.CountRejected();
  SchedulerGauges gauges;
  gauges.requests_running = 3;
  gauges.requests_waiting = 2;
  gauges.kv_blocks_total = 100;
  gauges.kv_blocks_used = 40;
  gauges.kv_blocks_free = 60;
  gauges.kv_blocks_shared = 5;
  gauges.preemptions = 1;
  gauges.prefix_cache_hit_tokens = 32;
  gauges.computed_tokens = 900;
  gauges.spec_decode_drafts = 12;
  gauges.spec_decode_draft_tokens = 40;
  gauges.spec_decode_accepted_tokens = 25;
  metrics.SetSchedulerGauges(gauges);
  const std::string text = metrics.RenderPrometheus();
  for (const char* line : {"kvjit_time_to_first_token_seconds_count 1\n",
                           "kvjit_time_per_output_token_seconds_count 1\n",
                           "kvjit_e2e_request_latency_seconds_sum 0.5\n",
                           "kvjit_num_requests_running 3\n", "kvjit_num_requests_waiting 2\n",
                           "kvjit_kv_blocks_used 40\n", "kvjit_kv_blocks_free 60\n",
                           "kvjit_kv_blocks_shared 5\n", "kvjit_num_preemptions_total 1\n",
                           "kvjit_prefix_cache_hit_tokens_total 32\n",
                           "kvjit_computed_tokens_total 900\n", "kvjit_prompt_tokens_total 10\n",
                           "kvjit_generation_tokens_total 7\n",
                           "kvjit_requests_cancelled_total 1\n",
                           "kvjit_requests_rejected_total 1\n",
                           "kvjit_spec_decode_num_drafts_total 12\n",
                           "kvjit_spec_decode_num_draft_tokens_total 40\n",
                           "kvjit_spec_decode_num_accepted_tokens_total 25\n",
                           "# TYPE kvjit_spec_decode_num_accepted_tokens_total counter\n",
                           "# TYPE kvjit_kv_blocks_used gauge\n",
                           "# TYPE kvjit_num_preemptions_total counter\n"}) {
    EXPECT_THAT(text, HasSubstr(line));
  }
}

}  // namespace
}  // namespace kvjit::serve
