#ifndef KVJIT_TOOLS_KVJIT_LOADBENCH_H_
#define KVJIT_TOOLS_KVJIT_LOADBENCH_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/tokenizer/Tokenizer.h"
#include "nlohmann/json.hpp"
#include "runtime/exec/Executable.h"
#include "runtime/exec/StepObserver.h"
#include "tools/kvjit/BenchStatistics.h"
#include "runtime/grammar/GrammarCompiler.h"
#include "tools/kvjit/SpeculationFlags.h"

namespace kvjit::cli {

// One request of a load run (`kvjit bench --requests`).
struct LoadRequest {
  std::vector<int32_t> prompt;
  int64_t max_new_tokens = 0;
  int64_t num_samples = 1;
};

// `count` requests of `prompt_tokens` made-up token ids each, the first
// `shared_prefix_tokens` of them the same in every request (a system prompt
// for the prefix cache to find), the rest different per request.
std::vector<LoadRequest> SyntheticLoadRequests(int64_t count, int64_t prompt_tokens,
                                               int64_t shared_prefix_tokens,
                                               int64_t max_new_tokens, int64_t num_samples,
                                               int64_t vocab_size);

// The requests in a JSON file: an array of objects, each with
// "max_new_tokens" and either "prompt_tokens" (a count of made-up token ids,
// as SyntheticLoadRequests makes them, no prefix shared) or "prompt" (text,
// encoded by `tokenizer` with BOS), and optionally "samples" (default
// `num_samples`). Errors name the file and the entry.
absl::StatusOr<std::vector<LoadRequest>> ReadLoadRequests(const std::string& path,
                                                          const tokenizer::Tokenizer& tokenizer,
                                                          int64_t num_samples, int64_t vocab_size);

struct LoadRunOptions {
  int threads = 2;
  // cpu, cuda or cuda:N (runtime::CreateStepRunner's spelling).
  std::string device = "cpu";
  // Per-step token budget; cut to the program's tokens per step.
  int64_t max_batch_tokens = 256;
  // 0: enough for every request's every sample without sharing.
  int64_t kv_pool_blocks = 0;
  bool prefix_caching = true;
  // 0 samples greedily; above, each sample with its own seed.
  float temperature = 0;
  // Watches every step of the run (a profiler); not owned, may be null.
  runtime::StepObserver* observer = nullptr;
  // Speculative decoding; a draft is made for each run (MakeDrafter), for
  // the target compiled from `model_or_kvx`.
  SpeculationChoice speculation;
  std::string model_or_kvx;
  // Structured output: every sample decoded under this grammar (ending
  // where it ends), null for none.
  std::shared_ptr<const grammar::CompiledGrammar> grammar;
};

// Submits every request at once to a BatchScheduler over the executable
// and steps until all are done. The report (JSON) holds TTFT and TPOT p50
// and p99 (ms; a request's TPOT is the mean over its samples), output
// tokens/s over the run, and the scheduler's and KV manager's counters:
// steps, preemptions, peak KV blocks, blocks shared at once, copied and
// evicted, prefix-cache hit tokens, tokens drafted and accepted, and under a
// grammar the masks computed beside the steps: their number, ms each, and
// their time and the time the steps waited for them as shares of the decode
// steps' time.
absl::StatusOr<nlohmann::json> RunKvjitLoad(const runtime::Executable& executable,
                                            const std::vector<LoadRequest>& requests,
                                            const LoadRunOptions& options);

// The requests as the JSON that `llamacpp_reference.py bench-load` reads:
// {"requests": [{"prompt": [ids], "max_new_tokens": G, "samples": N}, ...]}.
nlohmann::json LoadRequestsToJson(const std::vector<LoadRequest>& requests);

// One row per metric, one column per engine (its summary over runs:
// median and range); "-" where an engine lacks the metric.
void PrintLoadTable(
    const std::vector<std::pair<std::string, std::vector<std::pair<std::string, Spread>>>>& engines);

}  // namespace kvjit::cli

#endif  // KVJIT_TOOLS_KVJIT_LOADBENCH_H_
