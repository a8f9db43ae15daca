// kvjit bench MODEL_OR_KVX: prefill and decode speed at batch 1 on the CPU
// runtime, side by side with llama.cpp (through llama-cpp-python) in the same
// run when --llamacpp_python names an interpreter that has it.

#include <cstdio>
#include <memory>

#include "absl/flags/flag.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"
#include "runtime/core/StatusMacros.h"
#include "runtime/engine/Generator.h"
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

absl::Status RunBench(const std::vector<std::string>& arguments) {
  if (arguments.size() != 1) return absl::InvalidArgumentError("expected one MODEL_OR_KVX argument");
  KVJIT_ASSIGN_OR_RETURN(std::string kvx_path,
                         ExecutablePathFor(arguments[0], CompileOptionsFromFlags()));
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
          "MODEL_OR_KVX [--prompt_tokens P] [--gen_tokens G] [--llamacpp_python PY]",
          "tools/kvjit/BenchCommand.cpp", RunBench,
          {"block_size", "cache_dtype", "max_tokens_per_step"}};
}

}  // namespace kvjit::cli
