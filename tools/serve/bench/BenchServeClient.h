#ifndef KVJIT_TOOLS_SERVE_BENCH_BENCHSERVECLIENT_H_
#define KVJIT_TOOLS_SERVE_BENCH_BENCHSERVECLIENT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "tools/serve/bench/BenchServeRequests.h"

namespace kvjit::bench_serve {

// An OpenAI-compatible server under test.
struct ServedEndpoint {
  std::string base_url;  // http://host:port
  std::string path;      // /v1/completions or /v1/chat/completions
  std::string model;
  std::string api_key;   // sent as a Bearer token where set
  // Merged into every request body (engine-specific fields).
  nlohmann::json extra_body = nlohmann::json::object();
};

// How one streamed request went, timed from the moment it was sent.
struct RequestTiming {
  bool ok = false;
  std::string error;
  double time_to_first_token_s = 0;
  // Between successive chunks that carried text.
  std::vector<double> inter_token_latencies_s;
  double end_to_end_s = 0;
  std::string text;
  // From the server's usage where it sends one; -1 where it does not.
  int64_t prompt_tokens = -1;
  int64_t completion_tokens = -1;
  int64_t text_chunks = 0;
  std::string finish_reason;
};

// The model a server names first in GET /v1/models.
absl::StatusOr<std::string> FirstServedModel(const std::string& base_url,
                                             const std::string& api_key);

// Sends `request` with stream: true (and stream_options.include_usage,
// which servers that lack it ignore) and times its server-sent events.
// Greedy (temperature 0) unless the extra body says otherwise.
RequestTiming SendStreaming(const ServedEndpoint& endpoint, const BenchServeRequest& request);

}  // namespace kvjit::bench_serve

#endif  // KVJIT_TOOLS_SERVE_BENCH_BENCHSERVECLIENT_H_
