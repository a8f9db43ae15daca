#include "tools/kvjit/MemoryReport.h"

#include "runtime/core/ProcessStats.h"

namespace kvjit::cli {
namespace {

double MiB(uint64_t bytes) { return static_cast<double>(bytes) / (1 << 20); }

}  // namespace

MemoryReport MeasureMemory(const runtime::Executable& executable, const runtime::StepRunner& runner,
                           uint64_t tokenizer_heap) {
  MemoryReport report;
  for (const MappedFile& file : executable.weight_files()) {
    report.weights_mapped += file.bytes().size();
    report.weights_resident += MappedResidentBytes(file.bytes().data(), file.bytes().size());
  }
  report.executable_resident =
      MappedResidentBytes(executable.file_bytes().data(), executable.file_bytes().size());
  report.runner = runner.Memory();
  report.tokenizer_heap = tokenizer_heap;
  report.process = ReadProcessMemory();
  const uint64_t known_heap = tokenizer_heap + report.runner.weight_copies;
  report.other_heap = report.process.heap_in_use > known_heap ? report.process.heap_in_use - known_heap : 0;
  report.unaccounted = static_cast<int64_t>(report.process.resident) -
                       static_cast<int64_t>(report.weights_resident + report.executable_resident +
                                            report.runner.kv_pool_resident +
                                            report.runner.arena_resident +
                                            report.process.heap_in_use +
                                            report.process.code_resident);
  return report;
}

void PrintMemoryReport(const MemoryReport& report, std::FILE* out) {
  const runtime::RunnerMemory& runner = report.runner;
  std::fprintf(out, "memory: peak resident %.1f MiB, now %.1f MiB\n", MiB(report.process.peak_resident),
               MiB(report.process.resident));
  std::fprintf(out, "  weights        %8.1f MiB resident of %.1f MiB mapped\n",
               MiB(report.weights_resident), MiB(report.weights_mapped));
  std::fprintf(out, "  KV pool        %8.1f MiB resident of %.1f MiB reserved\n",
               MiB(runner.kv_pool_resident), MiB(runner.kv_pool_bytes));
  std::fprintf(out, "  arena          %8.1f MiB resident of %.1f MiB reserved (activations, logits)\n",
               MiB(runner.arena_resident), MiB(runner.arena_bytes));
  std::fprintf(out, "  weight copies  %8.1f MiB\n", MiB(runner.weight_copies));
  std::fprintf(out, "  tokenizer      %8.1f MiB\n", MiB(report.tokenizer_heap));
  std::fprintf(out, "  other heap     %8.1f MiB (sampling, step scratch, bookkeeping)\n",
               MiB(report.other_heap));
  std::fprintf(out, "  code           %8.1f MiB (kvjit and its shared libraries)\n",
               MiB(report.process.code_resident));
  std::fprintf(out, "  executable     %8.1f MiB (the .kvx file)\n", MiB(report.executable_resident));
  std::fprintf(out, "  rest           %8.1f MiB (stacks, allocator free lists)\n",
               static_cast<double>(report.unaccounted) / (1 << 20));
}

nlohmann::json MemoryReportToJson(const MemoryReport& report) {
  const runtime::RunnerMemory& runner = report.runner;
  return {{"peak_resident_bytes", report.process.peak_resident},
          {"resident_bytes", report.process.resident},
          {"weights_mapped_bytes", report.weights_mapped},
          {"weights_resident_bytes", report.weights_resident},
          {"kv_pool_bytes", runner.kv_pool_bytes},
          {"kv_pool_resident_bytes", runner.kv_pool_resident},
          {"arena_bytes", runner.arena_bytes},
          {"arena_resident_bytes", runner.arena_resident},
          {"weight_copies_bytes", runner.weight_copies},
          {"tokenizer_bytes", report.tokenizer_heap},
          {"other_heap_bytes", report.other_heap},
          {"code_resident_bytes", report.process.code_resident},
          {"executable_resident_bytes", report.executable_resident},
          {"unaccounted_bytes", report.unaccounted}};
}

void PrintStartupPhases(const StartupPhases& phases, std::FILE* out) {
  std::fprintf(out,
               "start-up: compile %.1f ms, load %.1f ms, tokenizer %.1f ms, allocate %.1f ms; "
               "first token %.0f ms after the process started\n",
               phases.compile_s * 1e3, phases.load_s * 1e3,
               phases.tokenizer_s * 1e3, phases.allocate_s * 1e3, phases.first_token_s * 1e3);
}

nlohmann::json StartupPhasesToJson(const StartupPhases& phases) {
  return {{"compile_s", phases.compile_s},
          {"load_s", phases.load_s},               {"tokenizer_s", phases.tokenizer_s},
          {"allocate_s", phases.allocate_s},       {"first_token_s", phases.first_token_s}};
}

}  // namespace kvjit::cli
