#ifndef KVJIT_TOOLS_SERVE_BENCH_BENCHSERVEREPORT_H_
#define KVJIT_TOOLS_SERVE_BENCH_BENCHSERVEREPORT_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "runtime/tokenizer/Tokenizer.h"
#include "tools/serve/bench/BenchServeClient.h"
#include "tools/serve/bench/BenchServeRequests.h"

namespace kvjit::bench_serve {

// Service-level objectives for goodput (vLLM's --goodput): a request counts
// when it meets every one given, in milliseconds.
struct ServiceLevelObjectives {
  std::optional<double> ttft_ms;
  std::optional<double> tpot_ms;
  std::optional<double> e2el_ms;
};

// "ttft:500,tpot:50,e2el:3000", any of the three; "" for none.
absl::StatusOr<ServiceLevelObjectives> ParseServiceLevelObjectives(absl::string_view text);

// One server's run of the benchmark.
struct ServeRun {
  std::string label;
  std::vector<BenchServeRequest> requests;
  std::vector<RequestTiming> timings;  // one per request
  double duration_s = 0;  // from the first request sent to the last answer
};

// The run's figures, as `vllm bench serve` reports them: completed and
// failed requests, request, output and total token throughput, TTFT, TPOT,
// ITL and end-to-end latency (mean, median, p99, in ms) and goodput. Output
// tokens are the server's usage where its stream reports one, else
// max_tokens for a choice that finished with "length", else `tokenizer`'s
// count of the text (when given), else the text chunks
// ("output_tokens_from" says which, for the last request).
nlohmann::json SummarizeServeRun(const ServeRun& run, const tokenizer::Tokenizer* tokenizer,
                                 const ServiceLevelObjectives& objectives);

// One row per figure, one column per run.
void PrintServeTable(const std::vector<nlohmann::json>& summaries);

}  // namespace kvjit::bench_serve

#endif  // KVJIT_TOOLS_SERVE_BENCH_BENCHSERVEREPORT_H_
