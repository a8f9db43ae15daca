#include "tools/serve/bench/BenchServeLoad.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <random>
#include <thread>

namespace kvjit::bench_serve {

using Clock = std::chrono::steady_clock;

std::vector<double> ArrivalTimes(size_t count, double rate, uint64_t seed) {
  std::vector<double> times(count, 0);
  if (std::isinf(rate)) return times;
  std::mt19937_64 random(seed);
  std::exponential_distribution<double> gap(rate);
  double at = 0;
  for (double& time : times) {
    time = at;
    at += gap(random);
  }
  return times;
}

ServeRun RunLoad(const std::string& label, const ServedEndpoint& endpoint,
                 const std::vector<BenchServeRequest>& requests,
                 const std::vector<double>& arrivals, int64_t max_concurrency) {
  // A first request, not timed and unlike the others (a prompt cache must
  // not serve the timed ones from it), lets the server warm up.
  SendStreaming(endpoint, {"Warm up.", 4, -1});

  ServeRun run;
  run.label = label;
  run.requests = requests;
  run.timings.resize(requests.size());
  const size_t workers =
      max_concurrency > 0 ? std::min<size_t>(requests.size(), static_cast<size_t>(max_concurrency))
                          : requests.size();
  std::atomic<size_t> next{0};
  const Clock::time_point start = Clock::now();
  std::vector<std::thread> threads;
  for (size_t w = 0; w < workers; ++w) {
    threads.emplace_back([&] {
      for (size_t i = next++; i < requests.size(); i = next++) {
        std::this_thread::sleep_until(start + std::chrono::duration_cast<Clock::duration>(
                                                  std::chrono::duration<double>(arrivals[i])));
        run.timings[i] = SendStreaming(endpoint, requests[i]);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  run.duration_s = std::chrono::duration<double>(Clock::now() - start).count();
  return run;
}

}  // namespace kvjit::bench_serve
