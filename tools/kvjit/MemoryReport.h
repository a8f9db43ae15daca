#ifndef KVJIT_TOOLS_KVJIT_MEMORYREPORT_H_
#define KVJIT_TOOLS_KVJIT_MEMORYREPORT_H_

#include <cstdint>
#include <cstdio>

#include "nlohmann/json.hpp"
#include "runtime/core/ProcessStats.h"
#include "runtime/exec/Executable.h"
#include "runtime/exec/StepRunner.h"

namespace kvjit::cli {

// Where a run's resident memory is: every part kvjit holds, measured (pages
// resident by mincore, heap by malloc's count), and what the process as a
// whole holds, so that what no part explains shows as the rest.
struct MemoryReport {
  ProcessMemory process;
  uint64_t weights_mapped = 0;
  uint64_t weights_resident = 0;
  uint64_t executable_resident = 0;  // the .kvx file itself
  runtime::RunnerMemory runner;
  uint64_t tokenizer_heap = 0;
  // The heap besides the tokenizer and the runner's weight copies: sampling
  // and logits buffers, per-step scratch, the executable's bookkeeping.
  uint64_t other_heap = 0;
  // Resident bytes none of the above explains: stacks, the allocator's free
  // lists, the C library's own.
  int64_t unaccounted = 0;
};

// The report now; `tokenizer_heap` is what loading the tokenizer allocated.
MemoryReport MeasureMemory(const runtime::Executable& executable, const runtime::StepRunner& runner,
                           uint64_t tokenizer_heap);

void PrintMemoryReport(const MemoryReport& report, std::FILE* out);
nlohmann::json MemoryReportToJson(const MemoryReport& report);

// The start-up of a run, phase by phase, in seconds.
struct StartupPhases {
  double compile_s = 0;    // compiling the model on the fly (0 when it was compiled)
  double load_s = 0;       // mapping and verifying the executable and its weights
  double tokenizer_s = 0;  // building the tokenizer from the executable
  double allocate_s = 0;   // the step runner: its threads, arena and KV pool
  // From the process's start (loading kvjit and its libraries included) to
  // the first generated token.
  double first_token_s = 0;
};

void PrintStartupPhases(const StartupPhases& phases, std::FILE* out);
nlohmann::json StartupPhasesToJson(const StartupPhases& phases);

}  // namespace kvjit::cli

#endif  // KVJIT_TOOLS_KVJIT_MEMORYREPORT_H_
