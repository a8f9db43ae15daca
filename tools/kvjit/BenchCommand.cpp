// kvjit bench MODEL_OR_KVX: prefill and decode speed at batch 1 on the CPU
// runtime, side by side with llama.cpp (through llama-cpp-python) in the same
// run when --llamacpp_python names an interpreter that has it.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>

#include "absl/flags/flag.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"
#include "runtime/core/StatusMacros.h"
#include "runtime/engine/Generator.h"
#include "runtime/engine/Scheduler.h"
#include "runtime/exec/Executable.h"
#include "runtime/exec/StepRunner.h"
#include "runtime/kv/KvBlockManager.h"
#include "tools/kvjit/CompileOnTheFly.h"
#include "tools/kvjit/SharedFlags.h"
#include "tools/kvjit/Subcommand.h"

ABSL_FLAG(int64_t, prompt_tokens, 128, "tokens in the prefill");
ABSL_FLAG(int64_t, gen_tokens, 64, "decode steps of one token each");
ABSL_FLAG(int, bench_threads, 2, "CPU threads, for kvjit and llama.cpp alike");
ABSL_FLAG(int, repeats, 3, "runs; the best is reported");
ABSL_FLAG(int64_t, requests, 1,
          "concurrent requests; above 1, a load run through the in-flight batching scheduler");
ABSL_FLAG(int64_t, max_batch_tokens, 256, "tokens one step carries in a load run");
ABSL_FLAG(int64_t, kv_pool_blocks, 0, "KV blocks for a load run (0: enough for every request)");
ABSL_FLAG(std::string, llamacpp_python, "",
          "a python with llama-cpp-python (tools/scripts/reference_env.sh prints one); empty: "
          "kvjit alone");
ABSL_FLAG(std::string, llamacpp_script, "tools/scripts/llamacpp_reference.py",
          "the script whose `bench` subcommand measures llama.cpp");

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
  KVJIT_ASSIGN_OR_RETURN(std::unique_ptr<runtime::CpuStepRunner> runner,
                         runtime::CpuStepRunner::Create(*executable, blocks,
                                                        absl::GetFlag(FLAGS_bench_threads)));
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

absl::StatusOr<Measurement> MeasureLlamaCpp(const std::string& model) {
  const std::string command = absl::StrCat(
      absl::GetFlag(FLAGS_llamacpp_python), " ", absl::GetFlag(FLAGS_llamacpp_script), " bench ",
      ShellQuoted(model), " --prompt-tokens ", absl::GetFlag(FLAGS_prompt_tokens), " --gen-tokens ",
      absl::GetFlag(FLAGS_gen_tokens), " --threads ", absl::GetFlag(FLAGS_bench_threads),
      " --repeats ", absl::GetFlag(FLAGS_repeats));
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(command.c_str(), "r"), pclose);
  if (pipe == nullptr) return absl::InternalError(absl::StrCat("cannot run: ", command));
  std::string output;
  char buffer[4096];
  while (size_t read = std::fread(buffer, 1, sizeof(buffer), pipe.get())) output.append(buffer, read);
  nlohmann::json parsed = nlohmann::json::parse(output, nullptr, /*allow_exceptions=*/false);
  bool complete = !parsed.is_discarded() && parsed.is_object();
  for (const char* key : {"prefill_tokens_per_s", "decode_tokens_per_s", "ttft_ms", "tpot_ms"}) {
    complete = complete && parsed.contains(key) && parsed[key].is_number();
  }
  if (!complete) {
    return absl::InternalError(absl::StrCat("llama.cpp's bench printed no result: ", command));
  }
  return Measurement{parsed["prefill_tokens_per_s"], parsed["decode_tokens_per_s"],
                     parsed["ttft_ms"], parsed["tpot_ms"]};
}

double Percentile(std::vector<double> values, double fraction) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t index = static_cast<size_t>(fraction * (values.size() - 1) + 0.5);
  return values[std::min(index, values.size() - 1)];
}

// N requests at once through the scheduler: TTFT and TPOT percentiles,
// output tokens/s over the whole run, peak KV blocks.
absl::Status RunLoad(const std::string& kvx_path) {
  KVJIT_ASSIGN_OR_RETURN(std::unique_ptr<runtime::Executable> executable,
                         runtime::Executable::Load(kvx_path));
  const int64_t requests = absl::GetFlag(FLAGS_requests);
  const int64_t prompt_tokens = absl::GetFlag(FLAGS_prompt_tokens);
  const int64_t gen_tokens = absl::GetFlag(FLAGS_gen_tokens);
  const int64_t block_size = executable->kv_layout().block_size();
  int64_t blocks = absl::GetFlag(FLAGS_kv_pool_blocks);
  if (blocks <= 0) blocks = requests * ((prompt_tokens + gen_tokens) / block_size + 2);
  KVJIT_ASSIGN_OR_RETURN(std::unique_ptr<runtime::CpuStepRunner> runner,
                         runtime::CpuStepRunner::Create(*executable, blocks,
                                                        absl::GetFlag(FLAGS_bench_threads)));
  runtime::BatchSchedulerOptions options;
  options.max_batch_tokens = std::min(absl::GetFlag(FLAGS_max_batch_tokens),
                                      runner->max_tokens_per_step());
  options.context_length = executable->config().context_length();
  KVJIT_ASSIGN_OR_RETURN(runtime::BatchScheduler scheduler,
                         runtime::BatchScheduler::Create(*runner, options));
  const int64_t vocab = executable->config().vocab_size();
  sampling::SamplingParams greedy;
  greedy.temperature = 0;
  std::vector<runtime::RequestId> ids;
  const auto start = std::chrono::steady_clock::now();
  for (int64_t r = 0; r < requests; ++r) {
    std::vector<int32_t> prompt(prompt_tokens);
    for (int64_t i = 0; i < prompt_tokens; ++i) {
      prompt[i] = static_cast<int32_t>((17 + 31 * i + 7 * r) % vocab);
    }
    KVJIT_ASSIGN_OR_RETURN(runtime::RequestId id,
                           scheduler.Submit(std::move(prompt), greedy, gen_tokens, {}));
    ids.push_back(id);
  }
  while (!scheduler.Idle()) KVJIT_RETURN_IF_ERROR(scheduler.Step());
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::vector<double> ttft_ms, tpot_ms;
  int64_t generated = 0;
  for (runtime::RequestId id : ids) {
    KVJIT_ASSIGN_OR_RETURN(runtime::RequestResult result, scheduler.TakeResult(id));
    ttft_ms.push_back(result.metrics.time_to_first_token_s * 1e3);
    tpot_ms.push_back(result.metrics.time_per_output_token_s * 1e3);
    generated += result.metrics.generated_tokens;
  }
  const int32_t peak_blocks = scheduler.kv_blocks().counters().peak_blocks_in_use;
  std::printf("%lld requests x (%lld prompt + %lld generated tokens), %lld tokens per step\n",
              static_cast<long long>(requests), static_cast<long long>(prompt_tokens),
              static_cast<long long>(gen_tokens), static_cast<long long>(options.max_batch_tokens));
  std::printf("TTFT p50 %.1f ms, p99 %.1f ms; TPOT p50 %.2f ms, p99 %.2f ms\n",
              Percentile(ttft_ms, 0.5), Percentile(ttft_ms, 0.99), Percentile(tpot_ms, 0.5),
              Percentile(tpot_ms, 0.99));
  std::printf("output %.1f tokens/s; peak KV blocks %d of %lld\n", generated / seconds, peak_blocks,
              static_cast<long long>(blocks));
  nlohmann::json report = {{"model", kvx_path},
                           {"requests", requests},
                           {"prompt_tokens", prompt_tokens},
                           {"gen_tokens", gen_tokens},
                           {"max_batch_tokens", options.max_batch_tokens},
                           {"ttft_ms_p50", Percentile(ttft_ms, 0.5)},
                           {"ttft_ms_p99", Percentile(ttft_ms, 0.99)},
                           {"tpot_ms_p50", Percentile(tpot_ms, 0.5)},
                           {"tpot_ms_p99", Percentile(tpot_ms, 0.99)},
                           {"output_tokens_per_s", generated / seconds},
                           {"peak_kv_blocks", peak_blocks}};
  std::printf("%s\n", report.dump().c_str());
  return absl::OkStatus();
}

absl::Status RunBench(const std::vector<std::string>& arguments) {
  if (arguments.size() != 1) return absl::InvalidArgumentError("expected one MODEL_OR_KVX argument");
  KVJIT_ASSIGN_OR_RETURN(std::string kvx_path,
                         ExecutablePathFor(arguments[0], CompileOptionsFromFlags()));
  if (absl::GetFlag(FLAGS_requests) > 1) return RunLoad(kvx_path);
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
  std::printf("%s\n", report.dump().c_str());
  return absl::OkStatus();
}

}  // namespace

Subcommand BenchCommand() {
  return {"bench",
          "measure prefill and decode tokens/s at batch 1 (TTFT, TPOT), beside llama.cpp",
          "MODEL_OR_KVX [--prompt_tokens P] [--gen_tokens G] [--llamacpp_python PY] "
          "[--requests N --max_batch_tokens B]",
          "tools/kvjit/BenchCommand.cpp", RunBench,
          {"block_size", "cache_dtype", "max_tokens_per_step"}};
}

}  // namespace kvjit::cli
