// kvjit bench MODEL_OR_KVX: prefill and decode speed at batch 1 on the CPU
// runtime, or with --requests / --requests_json a load run through the
// in-flight batching scheduler; side by side with llama.cpp (through
// llama-cpp-python) in the same run when --llamacpp_python names an
// interpreter that has it.

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>

#include "absl/flags/flag.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"
#include "runtime/core/StatusMacros.h"
#include "runtime/engine/Generator.h"
#include "runtime/engine/RunnerFactory.h"
#include "runtime/exec/Executable.h"
#include "runtime/exec/StepRunner.h"
#include "tools/kvjit/CompileOnTheFly.h"
#include "tools/kvjit/KvxTokenizer.h"
#include "tools/kvjit/LoadBench.h"
#include "tools/kvjit/SharedFlags.h"
#include "tools/kvjit/Subcommand.h"

ABSL_FLAG(int64_t, prompt_tokens, 128, "tokens in the prefill");
ABSL_FLAG(int64_t, gen_tokens, 64, "decode steps of one token each");
ABSL_FLAG(int, bench_threads, 2, "CPU threads, for kvjit and llama.cpp alike");
ABSL_FLAG(int, repeats, 3, "runs; the best is reported");
ABSL_FLAG(int64_t, requests, 1,
          "concurrent requests; above 1, a load run through the in-flight batching scheduler: "
          "every request submitted at once, each of --prompt_tokens made-up tokens and "
          "--gen_tokens generated ones");
ABSL_FLAG(std::string, requests_json, "",
          "a load run of the requests in this file: a JSON array of objects, each with "
          "\"max_new_tokens\" and either \"prompt_tokens\" (a count of made-up token ids) or "
          "\"prompt\" (text, tokenized with BOS), optionally \"samples\"; e.g. "
          "[{\"prompt_tokens\": 128, \"max_new_tokens\": 64}, {\"prompt\": \"Hi\", "
          "\"max_new_tokens\": 16, \"samples\": 4}]");
ABSL_FLAG(double, sample_temperature, 0,
          "sampling temperature of a load run; 0 is greedy (request r, sample i: seed 1000 r + i)");
ABSL_FLAG(int64_t, shared_prefix_tokens, 0,
          "in a --requests load run, leading prompt tokens every request shares (a system prompt)");
ABSL_FLAG(bool, prefix_caching, true,
          "in a load run, reuse the KV blocks of prompt beginnings already computed");
ABSL_FLAG(int64_t, kv_pool_blocks, 0,
          "KV blocks for a load run (0: enough for every sample of every request, unshared)");
ABSL_FLAG(std::string, report_json, "", "also write the report, as JSON, to this file");
ABSL_FLAG(std::string, llamacpp_python, "",
          "a python with llama-cpp-python (tools/scripts/reference_env.sh prints one); empty: "
          "kvjit alone");
ABSL_FLAG(std::string, llamacpp_script, "tools/scripts/llamacpp_reference.py",
          "the script whose `bench` and `bench-load` subcommands measure llama.cpp");

namespace kvjit::cli {
namespace {

struct Measurement {
  double prefill_tokens_per_s = 0;
  double decode_tokens_per_s = 0;
  double ttft_ms = 0;
  double tpot_ms = 0;
};

nlohmann::json ToJson(const std::string& engine, const Measurement& m) {
  return {{"engine", engine},
          {"prefill_tokens_per_s", m.prefill_tokens_per_s},
          {"decode_tokens_per_s", m.decode_tokens_per_s},
          {"ttft_ms", m.ttft_ms},
          {"tpot_ms", m.tpot_ms}};
}

absl::StatusOr<Measurement> MeasureKvjit(const std::string& kvx_path) {
  KVJIT_ASSIGN_OR_RETURN(std::unique_ptr<runtime::Executable> executable,
                         runtime::Executable::Load(kvx_path));
  const int64_t prompt_tokens = absl::GetFlag(FLAGS_prompt_tokens);
  const int64_t gen_tokens = absl::GetFlag(FLAGS_gen_tokens);
  const int64_t block_size = executable->kv_layout().block_size();
  const int64_t blocks = (prompt_tokens + gen_tokens + block_size - 1) / block_size + 1;
  KVJIT_ASSIGN_OR_RETURN(std::unique_ptr<runtime::StepRunner> runner,
                         runtime::CreateStepRunner(*executable, blocks,
                                                   absl::GetFlag(FLAGS_bench_threads),
                                                   DeviceFromFlags(*executable)));
  const int64_t vocab = executable->config().vocab_size();
  std::vector<int32_t> prompt(prompt_tokens);
  for (int64_t i = 0; i < prompt_tokens; ++i) prompt[i] = static_cast<int32_t>((17 + 31 * i) % vocab);
  runtime::Generator generator(*runner, prompt_tokens + gen_tokens + 1);
  sampling::SamplingParams greedy;
  greedy.temperature = 0;
  Measurement best;
  for (int run = 0; run < absl::GetFlag(FLAGS_repeats); ++run) {
    KVJIT_ASSIGN_OR_RETURN(runtime::GenerationResult result,
                           generator.Generate(prompt, greedy, gen_tokens + 1,
                                              [](int32_t) { return true; }));
    const runtime::GenerationMetrics& m = result.metrics;
    best.prefill_tokens_per_s = std::max(best.prefill_tokens_per_s, m.prefill_tokens_per_s);
    best.decode_tokens_per_s = std::max(best.decode_tokens_per_s, m.decode_tokens_per_s);
    best.ttft_ms = run == 0 ? m.time_to_first_token_s * 1e3
                            : std::min(best.ttft_ms, m.time_to_first_token_s * 1e3);
    best.tpot_ms = run == 0 ? m.time_per_output_token_s * 1e3
                            : std::min(best.tpot_ms, m.time_per_output_token_s * 1e3);
  }
  return best;
}

// `text` as one word of a POSIX shell command line.
std::string ShellQuoted(const std::string& text) {
  std::string quoted = "'";
  for (char c : text) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

// Runs `command` and parses what it prints as one JSON object.
absl::StatusOr<nlohmann::json> RunForJson(const std::string& command) {
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(command.c_str(), "r"), pclose);
  if (pipe == nullptr) return absl::InternalError(absl::StrCat("cannot run: ", command));
  std::string output;
  char buffer[4096];
  while (size_t read = std::fread(buffer, 1, sizeof(buffer), pipe.get())) output.append(buffer, read);
  nlohmann::json parsed = nlohmann::json::parse(output, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded() || !parsed.is_object()) {
    return absl::InternalError(absl::StrCat("printed no JSON result: ", command));
  }
  return parsed;
}

absl::StatusOr<Measurement> MeasureLlamaCpp(const std::string& model) {
  const std::string command = absl::StrCat(
      absl::GetFlag(FLAGS_llamacpp_python), " ", absl::GetFlag(FLAGS_llamacpp_script), " bench ",
      ShellQuoted(model), " --prompt-tokens ", absl::GetFlag(FLAGS_prompt_tokens), " --gen-tokens ",
      absl::GetFlag(FLAGS_gen_tokens), " --threads ", absl::GetFlag(FLAGS_bench_threads),
      " --repeats ", absl::GetFlag(FLAGS_repeats));
  KVJIT_ASSIGN_OR_RETURN(nlohmann::json parsed, RunForJson(command));
  for (const char* key : {"prefill_tokens_per_s", "decode_tokens_per_s", "ttft_ms", "tpot_ms"}) {
    if (!parsed.contains(key) || !parsed[key].is_number()) {
      return absl::InternalError(absl::StrCat("llama.cpp's bench printed no ", key, ": ", command));
    }
  }
  return Measurement{parsed["prefill_tokens_per_s"], parsed["decode_tokens_per_s"],
                     parsed["ttft_ms"], parsed["tpot_ms"]};
}

absl::Status WriteReport(const nlohmann::json& report) {
  std::printf("%s\n", report.dump().c_str());
  const std::string path = absl::GetFlag(FLAGS_report_json);
  if (path.empty()) return absl::OkStatus();
  std::ofstream file(path);
  file << report.dump(2) << "\n";
  if (!file) return absl::InternalError(absl::StrCat("cannot write the report to ", path));
  return absl::OkStatus();
}

// The same requests through llama.cpp's batched decoding: one sequence id
// per sample, prompts fed in chunks under the same token budget.
absl::StatusOr<nlohmann::json> MeasureLlamaCppLoad(const std::string& model,
                                                   const std::vector<LoadRequest>& requests,
                                                   int64_t max_batch_tokens) {
  // mkstemp, not a name of our own: another user's file or link in /tmp
  // must not receive the requests.
  std::string requests_path =
      absl::StrCat(std::filesystem::temp_directory_path().string(), "/kvjit-load-XXXXXX");
  const int fd = mkstemp(requests_path.data());
  if (fd < 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("cannot create ", requests_path));
  }
  close(fd);
  {
    std::ofstream file(requests_path);
    file << LoadRequestsToJson(requests).dump();
    if (!file) {
      std::filesystem::remove(requests_path);
      return absl::InternalError(absl::StrCat("cannot write ", requests_path));
    }
  }
  const std::string command = absl::StrCat(
      absl::GetFlag(FLAGS_llamacpp_python), " ", absl::GetFlag(FLAGS_llamacpp_script),
      " bench-load ", ShellQuoted(model), " --requests-file ", ShellQuoted(requests_path),
      " --max-batch-tokens ", max_batch_tokens, " --threads ", absl::GetFlag(FLAGS_bench_threads));
  absl::StatusOr<nlohmann::json> report = RunForJson(command);
  std::filesystem::remove(requests_path);
  return report;
}

// A load run: the requests through kvjit's scheduler, then (with
// --llamacpp_python) through llama.cpp; a table and the JSON report.
absl::Status RunLoad(const std::string& model, const std::string& kvx_path) {
  KVJIT_ASSIGN_OR_RETURN(std::unique_ptr<runtime::Executable> executable,
                         runtime::Executable::Load(kvx_path));
  const int64_t vocab = executable->config().vocab_size();
  const int64_t samples = absl::GetFlag(FLAGS_samples);
  std::vector<LoadRequest> requests;
  if (!absl::GetFlag(FLAGS_requests_json).empty()) {
    KVJIT_ASSIGN_OR_RETURN(std::unique_ptr<tokenizer::Tokenizer> tokenizer,
                           TokenizerFromExecutable(executable->root()));
    KVJIT_ASSIGN_OR_RETURN(requests, ReadLoadRequests(absl::GetFlag(FLAGS_requests_json), *tokenizer,
                                                      samples, vocab));
  } else {
    requests = SyntheticLoadRequests(absl::GetFlag(FLAGS_requests), absl::GetFlag(FLAGS_prompt_tokens),
                                     absl::GetFlag(FLAGS_shared_prefix_tokens),
                                     absl::GetFlag(FLAGS_gen_tokens), samples, vocab);
  }
  LoadRunOptions options;
  options.threads = absl::GetFlag(FLAGS_bench_threads);
  options.device = DeviceFromFlags(*executable);
  options.max_batch_tokens = absl::GetFlag(FLAGS_max_batch_tokens);
  options.kv_pool_blocks = absl::GetFlag(FLAGS_kv_pool_blocks);
  options.prefix_caching = absl::GetFlag(FLAGS_prefix_caching);
  options.temperature = static_cast<float>(absl::GetFlag(FLAGS_sample_temperature));
  const bool with_llamacpp = !absl::GetFlag(FLAGS_llamacpp_python).empty();
  if (with_llamacpp && absl::EndsWith(model, ".kvx")) {
    return absl::InvalidArgumentError("comparing with llama.cpp needs the GGUF, not a .kvx");
  }
  KVJIT_ASSIGN_OR_RETURN(nlohmann::json kvjit, RunKvjitLoad(*executable, requests, options));
  std::vector<nlohmann::json> results = {kvjit};
  if (with_llamacpp) {
    KVJIT_ASSIGN_OR_RETURN(nlohmann::json llama,
                           MeasureLlamaCppLoad(model, requests, kvjit["max_batch_tokens"].get<int64_t>()));
    results.push_back(std::move(llama));
  }
  PrintLoadTable(results);
  nlohmann::json report = {{"model", model}, {"mode", "load"}, {"results", results}};
  if (results.size() == 2 && results[1].contains("output_tokens_per_s") &&
      results[1]["output_tokens_per_s"].is_number()) {
    report["output_tokens_per_s_ratio"] =
        kvjit["output_tokens_per_s"].get<double>() / results[1]["output_tokens_per_s"].get<double>();
  }
  return WriteReport(report);
}

absl::Status RunBench(const std::vector<std::string>& arguments) {
  if (arguments.size() != 1) return absl::InvalidArgumentError("expected one MODEL_OR_KVX argument");
  KVJIT_ASSIGN_OR_RETURN(std::string kvx_path,
                         ExecutablePathFor(arguments[0], CompileOptionsFromFlags()));
  if (absl::GetFlag(FLAGS_requests) > 1 || !absl::GetFlag(FLAGS_requests_json).empty()) {
    return RunLoad(arguments[0], kvx_path);
  }
  KVJIT_ASSIGN_OR_RETURN(Measurement kvjit, MeasureKvjit(kvx_path));
  nlohmann::json report = {{"model", arguments[0]},
                           {"threads", absl::GetFlag(FLAGS_bench_threads)},
                           {"prompt_tokens", absl::GetFlag(FLAGS_prompt_tokens)},
                           {"gen_tokens", absl::GetFlag(FLAGS_gen_tokens)},
                           {"results", {ToJson("kvjit", kvjit)}}};
  std::printf("%-10s %14s %14s %10s %10s\n", "engine", "prefill tok/s", "decode tok/s",
              "TTFT ms", "TPOT ms");
  auto row = [](const char* engine, const Measurement& m) {
    std::printf("%-10s %14.1f %14.1f %10.2f %10.2f\n", engine, m.prefill_tokens_per_s,
                m.decode_tokens_per_s, m.ttft_ms, m.tpot_ms);
  };
  row("kvjit", kvjit);
  if (!absl::GetFlag(FLAGS_llamacpp_python).empty()) {
    if (absl::EndsWith(arguments[0], ".kvx")) {
      return absl::InvalidArgumentError("comparing with llama.cpp needs the GGUF, not a .kvx");
    }
    KVJIT_ASSIGN_OR_RETURN(Measurement llama, MeasureLlamaCpp(arguments[0]));
    row("llama.cpp", llama);
    std::printf("%-10s %14.2f %14.2f\n", "ratio", kvjit.prefill_tokens_per_s / llama.prefill_tokens_per_s,
                kvjit.decode_tokens_per_s / llama.decode_tokens_per_s);
    report["results"].push_back(ToJson("llama.cpp", llama));
    report["decode_ratio"] = kvjit.decode_tokens_per_s / llama.decode_tokens_per_s;
    report["prefill_ratio"] = kvjit.prefill_tokens_per_s / llama.prefill_tokens_per_s;
  }
  return WriteReport(report);
}

}  // namespace

Subcommand BenchCommand() {
  return {"bench",
          "measure prefill and decode tokens/s at batch 1 (TTFT, TPOT), or a load of many "
          "requests, beside llama.cpp",
          "MODEL_OR_KVX [--prompt_tokens P] [--gen_tokens G] [--llamacpp_python PY] "
          "[--requests N | --requests_json FILE] [--samples S] [--max_batch_tokens B] "
          "[--report_json FILE]",
          "tools/kvjit/BenchCommand.cpp", RunBench,
          {"block_size", "cache_dtype", "max_tokens_per_step", "max_batch_tokens", "samples", "device"}};
}

}  // namespace kvjit::cli
