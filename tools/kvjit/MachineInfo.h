#ifndef KVJIT_TOOLS_KVJIT_MACHINEINFO_H_
#define KVJIT_TOOLS_KVJIT_MACHINEINFO_H_

#include <string>
#include <vector>

#include "nlohmann/json.hpp"

namespace kvjit::cli {

// What a benchmark figure depends on, recorded beside it.
struct MachineInfo {
  std::string cpu_model;                // /proc/cpuinfo's "model name"
  std::vector<std::string> isa_flags;   // of the SIMD extensions kernels use, those the CPU has
  int logical_cores = 0;
  int bandwidth_threads = 0;
  double read_bandwidth_gb_s = 0;       // measured: median of a few passes over 512 MiB
  std::string kvjit_commit;             // `git describe --always --dirty` of the working directory
};

// Reads the CPU's description and measures the memory read bandwidth with
// `threads` threads (about a quarter of a second).
MachineInfo DescribeMachine(int threads);

nlohmann::json MachineInfoToJson(const MachineInfo& machine);

// The f32 arithmetic rate the CPU reaches with `threads` threads, each
// running twelve independent chains of the widest fused multiply-add it has
// (AVX-512 or AVX2; scalar without either): the peak a kernel's GFLOP/s is
// set against. About a fifth of a second.
struct PeakCompute {
  double gflop_s = 0;
  std::string source;  // how it was measured, in words
};
PeakCompute MeasurePeakCompute(int threads);

}  // namespace kvjit::cli

#endif  // KVJIT_TOOLS_KVJIT_MACHINEINFO_H_
