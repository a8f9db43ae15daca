// kvjit bench-serve [LABEL=]URL...: a load generator for OpenAI-compatible
// servers, as `vllm bench serve` is: the same requests (a JSON dataset, or
// random prompts of given lengths) to each server in turn, with Poisson
// arrivals at --request_rate under a concurrency limit, streamed; reports
// request and token throughput, TTFT, TPOT, ITL and end-to-end latency
// (mean, median, p99) and goodput, as a table and JSON.

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <memory>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"
#include "runtime/core/StatusMacros.h"
#include "tools/kvjit/MachineInfo.h"
#include "tools/kvjit/Subcommand.h"
#include "tools/serve/bench/BenchServeClient.h"
#include "tools/serve/bench/BenchServeLoad.h"
#include "tools/serve/bench/BenchServeReport.h"
#include "tools/serve/bench/BenchServeRequests.h"

ABSL_FLAG(std::string, endpoint, "/v1/completions",
          "the API to load: /v1/completions (the prompt as text) or /v1/chat/completions (the "
          "prompt as one user message)");
ABSL_FLAG(std::string, model_name, "",
          "the request's model field (default: each server's first in GET /v1/models)");
ABSL_FLAG(std::string, dataset_json, "",
          "requests as `kvjit bench --requests_json` reads them: [{\"prompt\": TEXT | "
          "\"prompt_tokens\": N, \"max_new_tokens\": G}, ...]; without it, --num_prompts random "
          "prompts");
ABSL_FLAG(int64_t, num_prompts, 100, "random prompts to send (without --dataset_json)");
ABSL_FLAG(int64_t, random_input_len, 128, "tokens per random prompt (needs --tokenizer)");
ABSL_FLAG(int64_t, random_output_len, 64, "max_tokens of each random prompt");
ABSL_FLAG(std::string, tokenizer, "",
          "a GGUF model whose tokenizer makes the random prompts and counts the tokens a server "
          "does not report");
ABSL_FLAG(double, request_rate, std::numeric_limits<double>::infinity(),
          "requests per second, arriving as a Poisson process; inf sends them all at once");
ABSL_FLAG(int64_t, max_concurrency, 0, "at most this many requests in flight (0: no limit)");
ABSL_FLAG(std::string, extra_body, "",
          "a JSON object merged into every request body, e.g. {\"temperature\": 0.8}");
ABSL_FLAG(std::string, server_extra_body, "",
          "a JSON object of LABEL: {fields} merged into the bodies sent to that server after "
          "--extra_body (fields one engine needs and another refuses), e.g. {\"kvjit\": "
          "{\"ignore_eos\": true}}");
ABSL_FLAG(std::string, goodput, "",
          "service-level objectives in ms for goodput, e.g. ttft:500,tpot:50,e2el:5000");
ABSL_FLAG(int64_t, bench_seed, 0, "seeds the random prompts and the arrival times");
ABSL_FLAG(int64_t, rounds, 1,
          "times the benchmark runs against every server, interleaved (random prompts are new "
          "each round)");
ABSL_FLAG(std::string, result_json, "", "also write the results, every run, as JSON here");

namespace kvjit::cli {
namespace {

using bench_serve::BenchServeRequest;
using bench_serve::ServedEndpoint;
using bench_serve::ServeRun;

struct ServerUnderTest {
  std::string label;
  ServedEndpoint endpoint;
};

// A flag's JSON object; an empty flag is an empty object.
absl::StatusOr<nlohmann::json> JsonObjectFlag(const std::string& text, const char* flag) {
  if (text.empty()) return nlohmann::json::object();
  nlohmann::json json = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!json.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat("--", flag, " must be a JSON object"));
  }
  return json;
}

absl::StatusOr<ServerUnderTest> ParseServer(const std::string& argument,
                                            const nlohmann::json& extra_body,
                                            const nlohmann::json& server_extra_body) {
  ServerUnderTest server;
  const size_t equals = argument.find('=');
  const std::string url = equals == std::string::npos ? argument : argument.substr(equals + 1);
  server.label = equals == std::string::npos ? url : argument.substr(0, equals);
  if (url.rfind("http://", 0) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", argument, "' is not [LABEL=]http://HOST:PORT"));
  }
  server.endpoint.base_url = url;
  server.endpoint.path = absl::GetFlag(FLAGS_endpoint);
  server.endpoint.extra_body = extra_body;
  if (const auto own = server_extra_body.find(server.label); own != server_extra_body.end()) {
    if (!own->is_object()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--server_extra_body: the fields for '", server.label, "' must be a JSON object"));
    }
    server.endpoint.extra_body.update(*own);
  }
  if (const char* key = std::getenv("OPENAI_API_KEY")) server.endpoint.api_key = key;
  server.endpoint.model = absl::GetFlag(FLAGS_model_name);
  if (server.endpoint.model.empty()) {
    KVJIT_ASSIGN_OR_RETURN(server.endpoint.model,
                           bench_serve::FirstServedModel(url, server.endpoint.api_key));
  }
  return server;
}

// The requests of round `round`. Random prompts are new each round (seed +
// round): a prefix cache would serve a repeated prompt from the round before.
absl::StatusOr<std::vector<BenchServeRequest>> Requests(const tokenizer::Tokenizer* tokenizer,
                                                        int64_t round) {
  const uint64_t seed = static_cast<uint64_t>(absl::GetFlag(FLAGS_bench_seed) + round);
  if (!absl::GetFlag(FLAGS_dataset_json).empty()) {
    return bench_serve::ReadBenchServeRequests(absl::GetFlag(FLAGS_dataset_json), tokenizer, seed);
  }
  if (tokenizer == nullptr) {
    return absl::InvalidArgumentError(
        "random prompts need --tokenizer MODEL.gguf (or give --dataset_json with text prompts)");
  }
  if (absl::GetFlag(FLAGS_num_prompts) < 1 || absl::GetFlag(FLAGS_random_input_len) < 1 ||
      absl::GetFlag(FLAGS_random_output_len) < 1) {
    return absl::InvalidArgumentError(
        "--num_prompts, --random_input_len and --random_output_len must be at least 1");
  }
  return bench_serve::RandomRequests(*tokenizer, absl::GetFlag(FLAGS_num_prompts),
                                     absl::GetFlag(FLAGS_random_input_len),
                                     absl::GetFlag(FLAGS_random_output_len), seed);
}

absl::Status RunBenchServe(const std::vector<std::string>& arguments) {
  if (arguments.empty()) {
    return absl::InvalidArgumentError("expected one or more [LABEL=]http://HOST:PORT servers");
  }
  const double rate = absl::GetFlag(FLAGS_request_rate);
  if (!(rate > 0)) return absl::InvalidArgumentError("--request_rate must be above 0 (or inf)");
  KVJIT_ASSIGN_OR_RETURN(bench_serve::ServiceLevelObjectives objectives,
                         bench_serve::ParseServiceLevelObjectives(absl::GetFlag(FLAGS_goodput)));
  KVJIT_ASSIGN_OR_RETURN(const nlohmann::json extra_body,
                         JsonObjectFlag(absl::GetFlag(FLAGS_extra_body), "extra_body"));
  KVJIT_ASSIGN_OR_RETURN(
      const nlohmann::json server_extra_body,
      JsonObjectFlag(absl::GetFlag(FLAGS_server_extra_body), "server_extra_body"));
  std::unique_ptr<tokenizer::Tokenizer> tokenizer;
  if (!absl::GetFlag(FLAGS_tokenizer).empty()) {
    KVJIT_ASSIGN_OR_RETURN(tokenizer,
                           bench_serve::LoadGgufTokenizer(absl::GetFlag(FLAGS_tokenizer)));
  }
  std::vector<ServerUnderTest> servers;
  for (const std::string& argument : arguments) {
    KVJIT_ASSIGN_OR_RETURN(ServerUnderTest server,
                           ParseServer(argument, extra_body, server_extra_body));
    servers.push_back(std::move(server));
  }
  const MachineInfo machine = DescribeMachine(2);
  std::vector<nlohmann::json> summaries;
  const int64_t rounds = std::max<int64_t>(1, absl::GetFlag(FLAGS_rounds));
  size_t num_requests = 0;
  for (int64_t round = 0; round < rounds; ++round) {
    KVJIT_ASSIGN_OR_RETURN(std::vector<BenchServeRequest> requests,
                           Requests(tokenizer.get(), round));
    if (requests.empty()) return absl::InvalidArgumentError("no requests to send");
    num_requests = requests.size();
    const std::vector<double> arrivals = bench_serve::ArrivalTimes(
        requests.size(), rate, static_cast<uint64_t>(absl::GetFlag(FLAGS_bench_seed) + round));
    for (const ServerUnderTest& server : servers) {
      std::fprintf(stderr, "kvjit bench-serve: %zu requests to %s (%s)%s\n", requests.size(),
                   server.label.c_str(), server.endpoint.base_url.c_str(),
                   rounds > 1 ? absl::StrCat(", round ", round + 1).c_str() : "");
      ServeRun run = bench_serve::RunLoad(server.label, server.endpoint, requests, arrivals,
                                          absl::GetFlag(FLAGS_max_concurrency));
      if (rounds > 1) run.label = absl::StrCat(run.label, " #", round + 1);
      nlohmann::json summary = bench_serve::SummarizeServeRun(run, tokenizer.get(), objectives);
      summary["url"] = server.endpoint.base_url;
      summary["model"] = server.endpoint.model;
      summaries.push_back(std::move(summary));
    }
  }
  bench_serve::PrintServeTable(summaries);
  if (!absl::GetFlag(FLAGS_result_json).empty()) {
    nlohmann::json report = {
        {"endpoint", absl::GetFlag(FLAGS_endpoint)},
        {"num_requests", num_requests},
        {"rounds", rounds},
        {"request_rate", std::isinf(rate) ? nlohmann::json("inf") : nlohmann::json(rate)},
        {"max_concurrency", absl::GetFlag(FLAGS_max_concurrency)},
        {"extra_body", extra_body},
        {"server_extra_body", server_extra_body},
        {"goodput_objectives", absl::GetFlag(FLAGS_goodput)},
        {"runs", summaries},
        {"machine", MachineInfoToJson(machine)}};
    std::ofstream out(absl::GetFlag(FLAGS_result_json));
    out << report.dump(2) << "\n";
    if (!out) {
      return absl::UnavailableError(absl::StrCat("cannot write ", absl::GetFlag(FLAGS_result_json)));
    }
  }
  return absl::OkStatus();
}

}  // namespace

Subcommand BenchServeCommand() {
  return {"bench-serve",
          "load OpenAI-compatible servers (kvjit serve, llama.cpp's, vLLM) with the same "
          "requests, as `vllm bench serve` does, and compare them",
          "[LABEL=]http://HOST:PORT... [--tokenizer MODEL.gguf] [--num_prompts N] "
          "[--request_rate R] [--max_concurrency C] [--dataset_json FILE] [--result_json FILE]",
          "tools/kvjit/BenchServeCommand.cpp", RunBenchServe};
}

}  // namespace kvjit::cli
