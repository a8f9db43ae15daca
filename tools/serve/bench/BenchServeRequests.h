#ifndef KVJIT_TOOLS_SERVE_BENCH_BENCHSERVEREQUESTS_H_
#define KVJIT_TOOLS_SERVE_BENCH_BENCHSERVEREQUESTS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/tokenizer/Tokenizer.h"

namespace kvjit::bench_serve {

// One request of a serving benchmark (`kvjit bench-serve`): a text prompt,
// sent alike to every server.
struct BenchServeRequest {
  std::string prompt;
  int64_t max_tokens = 0;
  // The prompt's tokens by --tokenizer; -1 without one.
  int64_t prompt_tokens = -1;
};

// The tokenizer of a GGUF model, to make prompts of a given token length
// and to count tokens a server does not report.
absl::StatusOr<std::unique_ptr<tokenizer::Tokenizer>> LoadGgufTokenizer(const std::string& path);

// `count` prompts of `input_len` tokens each (random tokens, as vLLM's
// random dataset makes them: drawn from the vocabulary's plain tokens and
// decoded to text), each asking for `output_len` tokens. Seeded: the same
// seed gives the same prompts.
std::vector<BenchServeRequest> RandomRequests(const tokenizer::Tokenizer& tokenizer, int64_t count,
                                              int64_t input_len, int64_t output_len,
                                              uint64_t seed);

// The requests of a JSON file, the format of `kvjit bench --requests_json`:
// an array of objects with "max_new_tokens" and either "prompt" (text) or
// "prompt_tokens" (a length, for random tokens; needs `tokenizer`).
// `tokenizer` may be null. Errors name the file and the entry.
absl::StatusOr<std::vector<BenchServeRequest>> ReadBenchServeRequests(
    const std::string& path, const tokenizer::Tokenizer* tokenizer, uint64_t seed);

}  // namespace kvjit::bench_serve

#endif  // KVJIT_TOOLS_SERVE_BENCH_BENCHSERVEREQUESTS_H_
