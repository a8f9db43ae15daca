#ifndef KVJIT_TOOLS_SERVE_BENCH_BENCHSERVELOAD_H_
#define KVJIT_TOOLS_SERVE_BENCH_BENCHSERVELOAD_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tools/serve/bench/BenchServeClient.h"
#include "tools/serve/bench/BenchServeReport.h"
#include "tools/serve/bench/BenchServeRequests.h"

namespace kvjit::bench_serve {

// When each request is sent, in seconds from the start: gaps drawn from
// the exponential distribution of the rate (vLLM's Poisson arrivals). An
// infinite rate sends every request at once.
std::vector<double> ArrivalTimes(size_t count, double rate, uint64_t seed);

// Sends `requests` to one server, streamed, each at its arrival time and at
// most `max_concurrency` at once (0: no limit), after a warm-up request
// that is not timed. The run is labelled `label`.
ServeRun RunLoad(const std::string& label, const ServedEndpoint& endpoint,
                 const std::vector<BenchServeRequest>& requests,
                 const std::vector<double>& arrivals, int64_t max_concurrency);

}  // namespace kvjit::bench_serve

#endif  // KVJIT_TOOLS_SERVE_BENCH_BENCHSERVELOAD_H_
