// kvjit bench MODEL_OR_KVX: prefill and decode speed at batch 1 on the CPU
// runtime, or with --requests / --requests_json a load run through the
// in-flight batching scheduler; side by side with llama.cpp (through
// llama-cpp-python) in the same run when --llamacpp_python names an
// interpreter that has it. Engines run interleaved (kvjit f32, kvjit f16,
// llama.cpp, kvjit f32, ...), every run is kept, and the tables give the
// median and range over the runs.

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>

#include "absl/flags/flag.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "frontend/gguf/GgufSplit.h"
#include "nlohmann/json.hpp"
#include "runtime/core/ProcessStats.h"
#include "runtime/core/StatusMacros.h"
#include "runtime/generation/Generator.h"
#include "runtime/generation/Speculation.h"
#include "runtime/generation/RunnerFactory.h"
#include "runtime/exec/Executable.h"
#include "runtime/exec/StepRunner.h"
#include "runtime/profile/StepProfiler.h"
#include "runtime/grammar/GrammarCompiler.h"
#include "runtime/schema/KvCacheFormat.h"
#include "tools/kvjit/BenchProfile.h"
#include "tools/kvjit/BenchStatistics.h"
#include "tools/kvjit/CompileOnTheFly.h"
#include "runtime/tokenizer/ExecutableTokenizer.h"
#include "tools/kvjit/LoadBench.h"
#include "tools/kvjit/MachineInfo.h"
#include "tools/kvjit/MemoryReport.h"
#include "tools/kvjit/GrammarFlags.h"
#include "tools/kvjit/SharedFlags.h"
#include "tools/kvjit/SpeculationFlags.h"
#include "tools/kvjit/SpeculationReport.h"
#include "tools/kvjit/Subcommand.h"

ABSL_FLAG(int64_t, prompt_tokens, 128, "tokens in the prefill");
ABSL_FLAG(int64_t, gen_tokens, 64, "decode steps of one token each");
ABSL_FLAG(int, bench_threads, 2, "CPU threads, for kvjit and llama.cpp alike");
ABSL_FLAG(int, runs, 5,
          "interleaved runs of each engine (kvjit f32, kvjit f16, llama.cpp, kvjit f32, ...), "
          "each after one warm-up; the report keeps every run and gives the median and range");
ABSL_FLAG(std::string, bench_cache_dtypes, "f32,f16",
          "the KV cache types kvjit runs with, each compiled from MODEL (K/V, e.g. q8_0/f16, names "
          "keys' and values' apart); a .kvx runs with its own");
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
ABSL_FLAG(bool, profile, false,
          "after the measured runs, --runs more runs of each kvjit engine (CPU) timing every "
          "instruction of its step program: per instruction and per op kind, ms per step, MB of "
          "weights, activations and KV cache touched, MFLOP, GB/s and GFLOP/s against the "
          "machine's measured read bandwidth and f32 FMA peak; a table on stdout and each "
          "engine's \"profile\" in the report");
ABSL_FLAG(std::string, trace, "",
          "write the profiled run's last prefill and decode step to this file as a Chrome/Perfetto "
          "trace (Trace Event JSON; open in ui.perfetto.dev); implies --profile");
ABSL_FLAG(std::string, llamacpp_python, "",
          "a python with llama-cpp-python, built natively for this CPU (tools/scripts/"
          "reference_env.sh native prints one); empty: kvjit alone");
ABSL_FLAG(std::string, llamacpp_script, "tools/scripts/llamacpp_reference.py",
          "the script whose `bench` and `bench-load` subcommands measure llama.cpp");
ABSL_FLAG(std::string, llamacpp_flash_attn, "on", "llama.cpp's flash attention: on or off");
ABSL_FLAG(std::string, llamacpp_cache_type, "f16", "llama.cpp's K and V cache type: f16, f32 or q8_0");
ABSL_FLAG(int64_t, llamacpp_ubatch, 0,
          "llama.cpp's physical batch (n_ubatch); 0: its logical batch, which is the whole "
          "prompt at batch 1 (one prefill step, as kvjit's) and --max_batch_tokens in a load run");

namespace kvjit::cli {
namespace {

// One engine of a benchmark: measure() runs it once and returns its figures.
struct Contender {
  std::string engine;
  std::function<absl::StatusOr<nlohmann::json>()> measure;
};

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

// The llama.cpp settings every llama.cpp path sets explicitly (its defaults
// change between versions), as the script's flags.
std::string LlamaCppSettings(int64_t n_batch) {
  const int64_t ubatch = absl::GetFlag(FLAGS_llamacpp_ubatch);
  return absl::StrCat(" --threads ", absl::GetFlag(FLAGS_bench_threads), " --flash-attn ",
                      ShellQuoted(absl::GetFlag(FLAGS_llamacpp_flash_attn)), " --cache-type ",
                      ShellQuoted(absl::GetFlag(FLAGS_llamacpp_cache_type)), " --n-batch ", n_batch,
                      " --n-ubatch ", ubatch > 0 ? ubatch : n_batch);
}

// llama.cpp loads a split GGUF from its first part, so that is the part it
// is given whichever part kvjit was.
std::string LlamaCppCommand(const std::string& subcommand, const std::string& model) {
  std::optional<std::vector<std::string>> parts = gguf::SplitPartPaths(model);
  return absl::StrCat(absl::GetFlag(FLAGS_llamacpp_python), " ",
                      ShellQuoted(absl::GetFlag(FLAGS_llamacpp_script)), " ", subcommand, " ",
                      ShellQuoted(parts.has_value() ? parts->front() : model));
}

// Checks that a measurement holds every figure the tables print.
absl::StatusOr<nlohmann::json> WithFigures(absl::StatusOr<nlohmann::json> measured,
                                           const std::vector<std::string>& keys,
                                           const std::string& who) {
  if (!measured.ok()) return measured;
  for (const std::string& key : keys) {
    if (!measured->contains(key) || !(*measured)[key].is_number()) {
      return absl::InternalError(absl::StrCat(who, " reported no number \"", key, "\""));
    }
  }
  return measured;
}

// The executables kvjit runs MODEL_OR_KVX with: one per --bench_cache_dtypes
// entry for a model, the file itself for a .kvx. Pairs of (engine, path).
absl::StatusOr<std::vector<std::pair<std::string, std::string>>> KvjitExecutables(
    const std::string& model_or_kvx) {
  std::vector<std::pair<std::string, std::string>> executables;
  if (absl::EndsWith(model_or_kvx, ".kvx")) {
    KVJIT_ASSIGN_OR_RETURN(std::unique_ptr<runtime::Executable> executable,
                           runtime::Executable::Load(model_or_kvx, LoadOptionsFromFlags()));
    const kvx::KvLayout& kv = executable->kv_layout();
    executables.emplace_back(absl::StrCat("kvjit ", kvx::KvCacheTypesName(kv.key_type(), kv.value_type())),
                             model_or_kvx);
    return executables;
  }
  for (absl::string_view dtype :
       absl::StrSplit(absl::GetFlag(FLAGS_bench_cache_dtypes), ',', absl::SkipEmpty())) {
    codegen::CompileOptions options = CompileOptionsFromFlags();
    // "K/V" names the keys' and the values' types apart.
    const std::vector<std::string> types = absl::StrSplit(dtype, absl::MaxSplits('/', 1));
    options.cache_dtype = types[0];
    options.cache_dtype_k = types.size() > 1 ? types[0] : "";
    options.cache_dtype_v = types.size() > 1 ? types[1] : "";
    KVJIT_ASSIGN_OR_RETURN(std::string path, ExecutablePathFor(model_or_kvx, options));
    executables.emplace_back(absl::StrCat("kvjit ", dtype), path);
  }
  if (executables.empty()) return absl::InvalidArgumentError("--bench_cache_dtypes names no cache type");
  return executables;
}

// Each contender --runs times, interleaved; every measurement tagged with
// its engine and run.
absl::StatusOr<std::vector<nlohmann::json>> RunInterleaved(const std::vector<Contender>& contenders) {
  const int runs = absl::GetFlag(FLAGS_runs);
  std::vector<nlohmann::json> measurements;
  for (int run = 0; run < runs; ++run) {
    for (const Contender& contender : contenders) {
      KVJIT_ASSIGN_OR_RETURN(nlohmann::json measured, contender.measure());
      measured["engine"] = contender.engine;
      measured["run"] = run;
      measurements.push_back(std::move(measured));
      std::fprintf(stderr, "kvjit bench: run %d/%d: %s done\n", run + 1, runs,
                   contender.engine.c_str());
    }
  }
  return measurements;
}

using Summary = std::vector<std::pair<std::string, Spread>>;

// Per engine, in contender order: its runs' summary.
std::vector<std::pair<std::string, Summary>> SummarizeByEngine(
    const std::vector<Contender>& contenders, const std::vector<nlohmann::json>& measurements) {
  std::vector<std::pair<std::string, Summary>> summaries;
  for (const Contender& contender : contenders) {
    std::vector<nlohmann::json> runs;
    for (const nlohmann::json& m : measurements) {
      if (m["engine"] == contender.engine) runs.push_back(m);
    }
    summaries.emplace_back(contender.engine, SummarizeRuns(runs));
  }
  return summaries;
}

// The report every mode writes: the machine, each engine's "settings" (as its
// first run gives them) and summary, every run, and kvjit's ratios to llama.cpp of the
// median of each figure in `ratio_keys`.
nlohmann::json Report(const std::string& mode, const std::string& model, const MachineInfo& machine,
                      const std::vector<std::pair<std::string, Summary>>& summaries,
                      const std::vector<nlohmann::json>& measurements,
                      const std::vector<std::string>& ratio_keys) {
  nlohmann::json engines = nlohmann::json::array();
  for (const auto& [engine, summary] : summaries) {
    nlohmann::json figures = nlohmann::json::object();
    for (const auto& [key, spread] : summary) {
      if (key != "run") figures[key] = SpreadToJson(spread);
    }
    nlohmann::json settings = nlohmann::json::object();
    for (const nlohmann::json& m : measurements) {
      if (m["engine"] == engine) {
        settings = m.value("settings", nlohmann::json::object());
        break;
      }
    }
    engines.push_back({{"engine", engine}, {"settings", settings}, {"summary", figures}});
  }
  const ProcessMemory process = ReadProcessMemory();
  nlohmann::json report = {{"mode", mode},
                           {"kvjit_peak_resident_bytes", process.peak_resident},
                           {"model", model},
                           {"threads", absl::GetFlag(FLAGS_bench_threads)},
                           {"runs", absl::GetFlag(FLAGS_runs)},
                           {"machine", MachineInfoToJson(machine)},
                           {"engines", engines},
                           {"measurements", measurements}};
  const auto llama = std::find_if(summaries.begin(), summaries.end(),
                                  [](const auto& entry) { return entry.first == "llama.cpp"; });
  if (llama == summaries.end()) return report;
  nlohmann::json ratios = nlohmann::json::object();
  for (const auto& [engine, summary] : summaries) {
    if (engine == "llama.cpp") continue;
    for (const std::string& key : ratio_keys) {
      const Spread ours = Lookup(summary, key), theirs = Lookup(llama->second, key);
      if (ours.runs > 0 && theirs.runs > 0 && theirs.median > 0) {
        ratios[absl::StrCat(engine, " / llama.cpp")][key] = ours.median / theirs.median;
      }
    }
  }
  report["median_ratios"] = ratios;
  return report;
}

// kvjit's ratios to llama.cpp, engine by engine and figure by figure, as
// Report wrote them.
void PrintRatios(const nlohmann::json& report,
                 const std::vector<std::pair<std::string, Summary>>& summaries,
                 const std::vector<std::string>& ratio_keys) {
  if (!report.contains("median_ratios")) return;
  for (const auto& [engine, summary] : summaries) {
    const std::string pair = absl::StrCat(engine, " / llama.cpp");
    if (!report["median_ratios"].contains(pair)) continue;
    std::printf("%-24s", pair.c_str());
    for (const std::string& key : ratio_keys) {
      if (report["median_ratios"][pair].contains(key)) {
        std::printf("  %s %.2f", key.c_str(), report["median_ratios"][pair][key].get<double>());
      }
    }
    std::printf("   (ratios of medians)\n");
  }
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

absl::Status CheckLlamaCppComparable(const std::string& model) {
  if (!absl::GetFlag(FLAGS_llamacpp_python).empty() && absl::EndsWith(model, ".kvx")) {
    return absl::InvalidArgumentError("comparing with llama.cpp needs the GGUF, not a .kvx");
  }
  return absl::OkStatus();
}

bool Profiling() { return absl::GetFlag(FLAGS_profile) || !absl::GetFlag(FLAGS_trace).empty(); }

// Prints the profiles and adds them to the report (engine i of `profiles` is
// report engine i), with the peak they are set against in its machine; no
// profiles, nothing.
absl::Status AddProfiles(const std::vector<EngineProfile>& profiles,
                                   const MachineInfo& machine, nlohmann::json& report) {
  if (profiles.empty()) return absl::OkStatus();
  const PeakCompute peak = MeasurePeakCompute(machine.bandwidth_threads);
  KVJIT_ASSIGN_OR_RETURN(std::vector<nlohmann::json> reports,
                         ReportProfiles(profiles, machine, peak, absl::GetFlag(FLAGS_runs),
                                        absl::GetFlag(FLAGS_trace)));
  for (size_t i = 0; i < reports.size(); ++i) report["engines"][i]["profile"] = reports[i];
  report["machine"]["peak_gflop_s"] = peak.gflop_s;
  report["machine"]["peak_source"] = peak.source;
  return absl::OkStatus();
}

// What a kvjit measurement ran with, beside its figures.
nlohmann::json KvjitSettings(const runtime::Executable& executable,
                             const SpeculationChoice& speculation) {
  return {{"kv_cache", kvx::KvCacheTypesName(executable.kv_layout().key_type(),
                                             executable.kv_layout().value_type())},
          {"kv_block_tokens", executable.kv_layout().block_size()},
          {"threads", absl::GetFlag(FLAGS_bench_threads)},
          {"device", DeviceFromFlags(executable)},
          {"speculative", speculation.Name()},
          {"draft_tokens", speculation.draft_tokens},
          {"speculation_max_batch", speculation.max_batch}};
}

// Each kvjit engine's drafts, medians over its runs, under the table;
// nothing without speculation.
void PrintSpeculation(const SpeculationChoice& speculation,
                      const std::vector<std::pair<std::string, Summary>>& summaries) {
  if (!speculation.enabled()) return;
  for (const auto& [engine, summary] : summaries) {
    if (Lookup(summary, "verify_steps").runs == 0) continue;
    const auto median = [&summary = summary](const char* key) {
      return static_cast<int64_t>(Lookup(summary, key).median);
    };
    std::printf("%s: %s (medians)\n", engine.c_str(),
                SpeculationSummary(speculation.Name(), median("drafted_tokens"),
                                   median("accepted_tokens"), median("verify_steps"))
                    .c_str());
  }
}

// Under a grammar: what its masks cost beside the decode steps.
void PrintGrammarCost(const std::vector<std::pair<std::string, Summary>>& summaries) {
  for (const auto& [engine, summary] : summaries) {
    if (Lookup(summary, "grammar_masks").runs == 0 || Lookup(summary, "grammar_masks").median == 0) {
      continue;
    }
    std::printf("%s: grammar masks %.0f, %.3f ms each; computing them took %.1f%% of the decode "
                "steps' time beside the steps, which waited %.2f%% for them (medians)\n",
                engine.c_str(), Lookup(summary, "grammar_masks").median,
                Lookup(summary, "grammar_mask_ms").median,
                100 * Lookup(summary, "grammar_mask_share").median,
                100 * Lookup(summary, "grammar_wait_share").median);
  }
}

// ---- batch 1 ----------------------------------------------------------------

const std::vector<std::string> kBatchOneFigures = {"prefill_tokens_per_s", "decode_tokens_per_s",
                                                   "ttft_ms", "tpot_ms"};

// A kvjit executable with its runner, drafter and generator, loaded once for
// all runs.
struct KvjitBatchOne {
  std::unique_ptr<runtime::Executable> executable;
  std::unique_ptr<runtime::StepRunner> runner;
  // May be null; declared after the runner, whose pool a self-draft reads.
  std::unique_ptr<runtime::Drafter> drafter;
  std::unique_ptr<runtime::Generator> generator;
  std::vector<int32_t> prompt;
  SpeculationChoice speculation;

  absl::StatusOr<nlohmann::json> MeasureOnce() {
    sampling::SamplingParams greedy;
    greedy.temperature = 0;
    const int64_t gen_tokens = absl::GetFlag(FLAGS_gen_tokens);
    KVJIT_ASSIGN_OR_RETURN(runtime::GenerationResult result,
                           generator->Generate(prompt, greedy, gen_tokens + 1,
                                               [](int32_t) { return true; }));
    const runtime::GenerationMetrics& m = result.metrics;
    return nlohmann::json{{"prefill_tokens_per_s", m.prefill_tokens_per_s},
                          {"decode_tokens_per_s", m.decode_tokens_per_s},
                          {"ttft_ms", m.time_to_first_token_s * 1e3},
                          {"tpot_ms", m.time_per_output_token_s * 1e3},
                          {"drafted_tokens", m.drafted_tokens},
                          {"accepted_tokens", m.accepted_tokens},
                          {"verify_steps", m.verify_steps},
                          {"mean_accepted_length",
                           runtime::MeanAcceptedLength(m.accepted_tokens, m.verify_steps)},
                          {"settings", KvjitSettings(*executable, speculation)}};
  }
};

absl::StatusOr<std::unique_ptr<KvjitBatchOne>> LoadBatchOne(const std::string& model,
                                                            const std::string& kvx_path,
                                                            const SpeculationChoice& speculation) {
  auto bench = std::make_unique<KvjitBatchOne>();
  bench->speculation = speculation;
  KVJIT_ASSIGN_OR_RETURN(bench->executable,
                         runtime::Executable::Load(kvx_path, LoadOptionsFromFlags()));
  const int64_t prompt_tokens = absl::GetFlag(FLAGS_prompt_tokens);
  const int64_t gen_tokens = absl::GetFlag(FLAGS_gen_tokens);
  const int64_t block_size = bench->executable->kv_layout().block_size();
  const int64_t blocks = (prompt_tokens + gen_tokens + block_size - 1) / block_size + 1;
  KVJIT_ASSIGN_OR_RETURN(bench->runner,
                         runtime::CreateStepRunner(*bench->executable, blocks,
                                                   absl::GetFlag(FLAGS_bench_threads),
                                                   DeviceFromFlags(*bench->executable)));
  const int64_t vocab = bench->executable->config().vocab_size();
  for (int64_t i = 0; i < prompt_tokens; ++i) {
    bench->prompt.push_back(static_cast<int32_t>((17 + 31 * i) % vocab));
  }
  KVJIT_ASSIGN_OR_RETURN(bench->drafter,
                         MakeDrafter(speculation, model, *bench->executable, *bench->runner,
                                     absl::GetFlag(FLAGS_bench_threads)));
  bench->generator = std::make_unique<runtime::Generator>(
      *bench->runner, prompt_tokens + gen_tokens + 1, bench->drafter.get(), speculation.draft_tokens);
  // The warm-up: first-touch page faults and caches are not what is measured.
  KVJIT_RETURN_IF_ERROR(bench->MeasureOnce().status());
  return bench;
}

absl::Status RunBatchOne(const std::string& model) {
  KVJIT_RETURN_IF_ERROR(CheckLlamaCppComparable(model));
  KVJIT_ASSIGN_OR_RETURN(auto executables, KvjitExecutables(model));
  KVJIT_ASSIGN_OR_RETURN(const SpeculationChoice speculation, SpeculationFromFlags());
  std::vector<std::unique_ptr<KvjitBatchOne>> benches;
  std::vector<Contender> contenders;
  for (const auto& [engine, path] : executables) {
    KVJIT_ASSIGN_OR_RETURN(std::unique_ptr<KvjitBatchOne> bench,
                           LoadBatchOne(model, path, speculation));
    KvjitBatchOne* loaded = bench.get();
    benches.push_back(std::move(bench));
    contenders.push_back({engine, [loaded, engine = engine] {
                            return WithFigures(loaded->MeasureOnce(), kBatchOneFigures, engine);
                          }});
  }
  if (!absl::GetFlag(FLAGS_llamacpp_python).empty()) {
    const int64_t prompt_tokens = absl::GetFlag(FLAGS_prompt_tokens);
    const std::string command =
        absl::StrCat(LlamaCppCommand("bench", model), " --prompt-tokens ", prompt_tokens,
                     " --gen-tokens ", absl::GetFlag(FLAGS_gen_tokens),
                     LlamaCppSettings(std::max<int64_t>(prompt_tokens, 1)));
    contenders.push_back({"llama.cpp", [command] {
                            return WithFigures(RunForJson(command), kBatchOneFigures, command);
                          }});
  }
  KVJIT_ASSIGN_OR_RETURN(std::vector<nlohmann::json> measurements, RunInterleaved(contenders));
  const auto summaries = SummarizeByEngine(contenders, measurements);

  std::printf("%d runs of each engine, interleaved; median (min-max)\n", absl::GetFlag(FLAGS_runs));
  std::printf("%-10s %26s %26s %22s %20s\n", "engine", "prefill tok/s", "decode tok/s", "TTFT ms",
              "TPOT ms");
  for (const auto& [engine, summary] : summaries) {
    std::printf("%-10s %26s %26s %22s %20s\n", engine.c_str(),
                FormatSpread(Lookup(summary, "prefill_tokens_per_s"), 1).c_str(),
                FormatSpread(Lookup(summary, "decode_tokens_per_s"), 1).c_str(),
                FormatSpread(Lookup(summary, "ttft_ms"), 2).c_str(),
                FormatSpread(Lookup(summary, "tpot_ms"), 3).c_str());
  }
  PrintSpeculation(speculation, summaries);
  // Each kvjit engine's memory after its runs (the process's peak and code
  // are shared by all engines of this one process), measured before the
  // machine's bandwidth is, which reads a buffer of its own.
  std::vector<nlohmann::json> memory;
  for (const std::unique_ptr<KvjitBatchOne>& bench : benches) {
    memory.push_back(MemoryReportToJson(MeasureMemory(*bench->executable, *bench->runner, 0)));
  }
  // Runs of their own, timed instruction by instruction, so that the clock
  // reads stay out of the measured runs.
  std::vector<EngineProfile> profiles;
  if (Profiling()) {
    for (size_t i = 0; i < benches.size(); ++i) {
      KvjitBatchOne& bench = *benches[i];
      auto profiler = std::make_unique<runtime::StepProfiler>(bench.executable->root());
      KVJIT_RETURN_IF_ERROR(bench.runner->SetObserver(profiler.get()));
      for (int run = 0; run < absl::GetFlag(FLAGS_runs); ++run) {
        KVJIT_RETURN_IF_ERROR(bench.MeasureOnce().status());
      }
      KVJIT_RETURN_IF_ERROR(bench.runner->SetObserver(nullptr));
      profiles.push_back({executables[i].first, std::move(profiler)});
    }
  }
  const MachineInfo machine = DescribeMachine(absl::GetFlag(FLAGS_bench_threads));
  const std::vector<std::string> ratio_keys = {"prefill_tokens_per_s", "decode_tokens_per_s"};
  nlohmann::json report = Report("batch1", model, machine, summaries, measurements, ratio_keys);
  for (size_t i = 0; i < memory.size(); ++i) report["engines"][i]["memory"] = memory[i];
  report["prompt_tokens"] = absl::GetFlag(FLAGS_prompt_tokens);
  report["gen_tokens"] = absl::GetFlag(FLAGS_gen_tokens);
  PrintRatios(report, summaries, ratio_keys);
  KVJIT_RETURN_IF_ERROR(AddProfiles(profiles, machine, report));
  return WriteReport(report);
}

// ---- load -------------------------------------------------------------------

const std::vector<std::string> kLoadFigures = {"output_tokens_per_s", "ttft_ms_p50", "tpot_ms_p50"};

// A file of the load run's requests for llama.cpp's side, removed with it.
class RequestsFile {
 public:
  static absl::StatusOr<std::unique_ptr<RequestsFile>> Write(const std::vector<LoadRequest>& requests) {
    // mkstemp, not a name of our own: another user's file or link in /tmp
    // must not receive the requests.
    std::string path =
        absl::StrCat(std::filesystem::temp_directory_path().string(), "/kvjit-load-XXXXXX");
    const int fd = mkstemp(path.data());
    if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat("cannot create ", path));
    close(fd);
    auto file = std::unique_ptr<RequestsFile>(new RequestsFile(path));
    std::ofstream stream(path);
    stream << LoadRequestsToJson(requests).dump();
    if (!stream) return absl::InternalError(absl::StrCat("cannot write ", path));
    return file;
  }
  ~RequestsFile() { std::filesystem::remove(path_); }
  const std::string& path() const { return path_; }

 private:
  explicit RequestsFile(std::string path) : path_(std::move(path)) {}
  std::string path_;
};

// `grammar_spec`: GrammarFromFlags'.
absl::Status RunLoad(const std::string& model, const std::optional<grammar::GrammarSpec>& grammar_spec) {
  KVJIT_RETURN_IF_ERROR(CheckLlamaCppComparable(model));
  KVJIT_ASSIGN_OR_RETURN(auto executables, KvjitExecutables(model));
  std::vector<std::unique_ptr<runtime::Executable>> loaded;
  for (const auto& [engine, path] : executables) {
    KVJIT_ASSIGN_OR_RETURN(std::unique_ptr<runtime::Executable> executable,
                           runtime::Executable::Load(path, LoadOptionsFromFlags()));
    loaded.push_back(std::move(executable));
  }
  const runtime::Executable& first = *loaded.front();
  const int64_t vocab = first.config().vocab_size();
  const int64_t samples = absl::GetFlag(FLAGS_samples);
  std::vector<LoadRequest> requests;
  if (!absl::GetFlag(FLAGS_requests_json).empty()) {
    KVJIT_ASSIGN_OR_RETURN(std::unique_ptr<tokenizer::Tokenizer> tokenizer,
                           tokenizer::TokenizerFromExecutable(first.root()));
    KVJIT_ASSIGN_OR_RETURN(requests, ReadLoadRequests(absl::GetFlag(FLAGS_requests_json), *tokenizer,
                                                      samples, vocab));
  } else {
    requests = SyntheticLoadRequests(absl::GetFlag(FLAGS_requests), absl::GetFlag(FLAGS_prompt_tokens),
                                     absl::GetFlag(FLAGS_shared_prefix_tokens),
                                     absl::GetFlag(FLAGS_gen_tokens), samples, vocab);
  }
  LoadRunOptions options;
  options.threads = absl::GetFlag(FLAGS_bench_threads);
  options.max_batch_tokens = absl::GetFlag(FLAGS_max_batch_tokens);
  options.kv_pool_blocks = absl::GetFlag(FLAGS_kv_pool_blocks);
  options.prefix_caching = absl::GetFlag(FLAGS_prefix_caching);
  options.temperature = static_cast<float>(absl::GetFlag(FLAGS_sample_temperature));
  KVJIT_ASSIGN_OR_RETURN(options.speculation, SpeculationFromFlags());
  options.model_or_kvx = model;
  if (grammar_spec) {
    if (!absl::GetFlag(FLAGS_llamacpp_python).empty()) {
      return absl::InvalidArgumentError(
          "llama.cpp's side of the load runs without a grammar: measure kvjit with and without "
          "--json_schema/--json/--grammar/--regex instead of beside --llamacpp_python");
    }
    KVJIT_ASSIGN_OR_RETURN(std::unique_ptr<tokenizer::Tokenizer> tokenizer,
                           tokenizer::TokenizerFromExecutable(first.root()));
    KVJIT_ASSIGN_OR_RETURN(std::unique_ptr<grammar::GrammarCompiler> compiler,
                           grammar::GrammarCompiler::Create(*tokenizer, vocab));
    KVJIT_ASSIGN_OR_RETURN(options.grammar, compiler->Compile(*grammar_spec));
  }

  std::vector<Contender> contenders;
  int64_t max_batch_tokens = 0;
  for (size_t i = 0; i < loaded.size(); ++i) {
    const runtime::Executable* executable = loaded[i].get();
    LoadRunOptions these = options;
    these.device = DeviceFromFlags(*executable);
    // The warm-up run; it also fixes the budget llama.cpp gets (the
    // program's tokens per step may cut --max_batch_tokens).
    KVJIT_ASSIGN_OR_RETURN(nlohmann::json warm_up, RunKvjitLoad(*executable, requests, these));
    max_batch_tokens = warm_up["max_batch_tokens"].get<int64_t>();
    const std::string engine = executables[i].first;
    contenders.push_back({engine, [executable, &requests, these, engine] {
                            absl::StatusOr<nlohmann::json> measured =
                                RunKvjitLoad(*executable, requests, these);
                            if (measured.ok()) {
                              (*measured)["settings"] = KvjitSettings(*executable, these.speculation);
                            }
                            return WithFigures(std::move(measured), kLoadFigures, engine);
                          }});
  }
  std::unique_ptr<RequestsFile> requests_file;
  if (!absl::GetFlag(FLAGS_llamacpp_python).empty()) {
    KVJIT_ASSIGN_OR_RETURN(requests_file, RequestsFile::Write(requests));
    const std::string command =
        absl::StrCat(LlamaCppCommand("bench-load", model), " --requests-file ",
                     ShellQuoted(requests_file->path()), LlamaCppSettings(max_batch_tokens));
    contenders.push_back({"llama.cpp", [command] {
                            return WithFigures(RunForJson(command), kLoadFigures, command);
                          }});
  }
  KVJIT_ASSIGN_OR_RETURN(std::vector<nlohmann::json> measurements, RunInterleaved(contenders));
  const auto summaries = SummarizeByEngine(contenders, measurements);
  std::printf("%d runs of each engine, interleaved; median (min-max)\n", absl::GetFlag(FLAGS_runs));
  PrintLoadTable(summaries);
  PrintSpeculation(options.speculation, summaries);
  PrintGrammarCost(summaries);
  std::vector<EngineProfile> profiles;
  if (Profiling()) {
    for (size_t i = 0; i < loaded.size(); ++i) {
      auto profiler = std::make_unique<runtime::StepProfiler>(loaded[i]->root());
      LoadRunOptions profiled = options;
      profiled.device = DeviceFromFlags(*loaded[i]);
      profiled.observer = profiler.get();
      for (int run = 0; run < absl::GetFlag(FLAGS_runs); ++run) {
        KVJIT_RETURN_IF_ERROR(RunKvjitLoad(*loaded[i], requests, profiled).status());
      }
      profiles.push_back({executables[i].first, std::move(profiler)});
    }
  }
  const MachineInfo machine = DescribeMachine(absl::GetFlag(FLAGS_bench_threads));
  const std::vector<std::string> ratio_keys = {"output_tokens_per_s"};
  nlohmann::json report = Report("load", model, machine, summaries, measurements, ratio_keys);
  PrintRatios(report, summaries, ratio_keys);
  KVJIT_RETURN_IF_ERROR(AddProfiles(profiles, machine, report));
  return WriteReport(report);
}

absl::Status RunBench(const std::vector<std::string>& arguments) {
  if (arguments.size() != 1) return absl::InvalidArgumentError("expected one MODEL_OR_KVX argument");
  if (const int runs = absl::GetFlag(FLAGS_runs); runs < 1) {
    return absl::InvalidArgumentError(absl::StrCat("--runs must be at least 1, got ", runs));
  }
  // Structured output is measured where the server decodes it: in the
  // in-flight batching scheduler, even for one request.
  KVJIT_ASSIGN_OR_RETURN(const std::optional<grammar::GrammarSpec> grammar_spec, GrammarFromFlags());
  if (absl::GetFlag(FLAGS_requests) > 1 || !absl::GetFlag(FLAGS_requests_json).empty() ||
      grammar_spec.has_value()) {
    return RunLoad(arguments[0], grammar_spec);
  }
  return RunBatchOne(arguments[0]);
}

}  // namespace

Subcommand BenchCommand() {
  return {"bench",
          "measure prefill and decode tokens/s at batch 1 (TTFT, TPOT), or a load of many "
          "requests, beside llama.cpp",
          "MODEL_OR_KVX [--prompt_tokens P] [--gen_tokens G] [--runs R] [--bench_cache_dtypes "
          "f32,f16] [--llamacpp_python PY] [--requests N | --requests_json FILE] [--samples S] "
          "[--max_batch_tokens B] [--speculative ngram|draft:FILE [--draft_tokens N]] [--report_json FILE] "
          "[--profile] [--trace FILE] [--json_schema FILE | --json | --grammar FILE | --regex R]",
          "tools/kvjit/BenchCommand.cpp", RunBench,
          WithGrammarFlags(WithSpeculationFlags({"tp", "block_size", "max_tokens_per_step", "max_batch_tokens", "samples", "device", "verify_weights"}))};
}

}  // namespace kvjit::cli
