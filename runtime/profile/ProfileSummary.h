#ifndef KVJIT_RUNTIME_PROFILE_PROFILESUMMARY_H_
#define KVJIT_RUNTIME_PROFILE_PROFILESUMMARY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "runtime/profile/StepProfiler.h"
#include "runtime/schema/kvx_generated.h"

namespace kvjit::runtime {

// The rates a profile's achieved figures are set against.
struct MachinePeaks {
  double read_bandwidth_gb_s = 0;
  double peak_gflop_s = 0;
  std::string peak_source;  // how peak_gflop_s was found, for the reader
};

// One instruction, or all instructions of one op kind, averaged per step.
struct ProfileRow {
  std::string name;
  int64_t instructions = 0;
  double ms_per_step = 0;
  double share = 0;  // of the step's time in instructions
  double weight_bytes = 0;
  double activation_bytes = 0;
  double kv_bytes = 0;
  double flops = 0;

  double bytes() const { return weight_bytes + activation_bytes + kv_bytes; }
  double gb_per_s() const { return ms_per_step > 0 ? bytes() / (ms_per_step * 1e6) : 0; }
  double gflop_per_s() const { return ms_per_step > 0 ? flops / (ms_per_step * 1e6) : 0; }
};

struct PhaseSummary {
  StepPhase phase = StepPhase::kDecode;
  int64_t steps = 0;
  double tokens_per_step = 0;
  double ms_per_step = 0;
  std::vector<ProfileRow> ops;           // one per op kind, most time first
  std::vector<ProfileRow> instructions;  // in program order
  ProfileRow total;
};

// "Linear blk.3.ffn_up.weight", "KvAttention layer 3", "SwiGlu": the op and
// what tells the instruction apart (its first weight, or its layer).
std::string InstructionName(const kvx::Executable& executable, const kvx::Instruction& instruction);

// The profiler's phases that ran steps, prefill first.
std::vector<PhaseSummary> SummarizeProfile(const StepProfiler& profiler);

// Per phase, a table by op kind and, when `per_instruction`, one row per
// program instruction: ms per step, share, MB of weights, activations and KV
// cache, MFLOP, GB/s and GFLOP/s, each against `peaks`.
std::string FormatProfile(const std::vector<PhaseSummary>& phases, const MachinePeaks& peaks,
                          bool per_instruction);

nlohmann::json ProfileToJson(const std::vector<PhaseSummary>& phases, const MachinePeaks& peaks);

}  // namespace kvjit::runtime

#endif  // KVJIT_RUNTIME_PROFILE_PROFILESUMMARY_H_
