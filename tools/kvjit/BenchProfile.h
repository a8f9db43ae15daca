#ifndef KVJIT_TOOLS_KVJIT_BENCHPROFILE_H_
#define KVJIT_TOOLS_KVJIT_BENCHPROFILE_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "runtime/profile/StepProfiler.h"
#include "tools/kvjit/MachineInfo.h"

namespace kvjit::cli {

// What `kvjit bench --profile` recorded of one kvjit engine's profiled run.
struct EngineProfile {
  std::string engine;
  std::unique_ptr<runtime::StepProfiler> profiler;
};

// Prints each engine's profile tables (of `runs` profiled runs) to stdout (by op kind, then by
// instruction), against the machine's measured read bandwidth and `peak`;
// writes the engines' last prefill and decode steps to `trace_path` as a
// Chrome/Perfetto trace (one process per engine) unless it is empty; and
// returns each engine's profile as the report's JSON.
absl::StatusOr<std::vector<nlohmann::json>> ReportProfiles(const std::vector<EngineProfile>& profiles,
                                                           const MachineInfo& machine,
                                                           const PeakCompute& peak, int runs,
                                                           const std::string& trace_path);

}  // namespace kvjit::cli

#endif  // KVJIT_TOOLS_KVJIT_BENCHPROFILE_H_
