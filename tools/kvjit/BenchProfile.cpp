#include "tools/kvjit/BenchProfile.h"

#include <cstdio>

#include "runtime/core/StatusMacros.h"
#include "runtime/profile/ProfileSummary.h"
#include "runtime/profile/TraceWriter.h"

namespace kvjit::cli {

absl::StatusOr<std::vector<nlohmann::json>> ReportProfiles(const std::vector<EngineProfile>& profiles,
                                                           const MachineInfo& machine,
                                                           const PeakCompute& peak,
                                                           int runs, const std::string& trace_path) {
  const runtime::MachinePeaks peaks = {machine.read_bandwidth_gb_s, peak.gflop_s, peak.source};
  std::vector<nlohmann::json> reports;
  runtime::TraceBuilder trace;
  for (size_t i = 0; i < profiles.size(); ++i) {
    const EngineProfile& profile = profiles[i];
    const std::vector<runtime::PhaseSummary> phases = runtime::SummarizeProfile(*profile.profiler);
    std::printf("\nprofile of %s, %d threads: time in each instruction, over %d profiled run%s after the measured ones\n%s",
                profile.engine.c_str(), machine.bandwidth_threads, runs, runs == 1 ? "" : "s",
                runtime::FormatProfile(phases, peaks, /*per_instruction=*/true).c_str());
    reports.push_back(runtime::ProfileToJson(phases, peaks));
    runtime::AddStepTimelines(*profile.profiler, static_cast<int>(i) + 1, profile.engine, trace);
  }
  if (!trace_path.empty()) KVJIT_RETURN_IF_ERROR(trace.WriteTo(trace_path));
  return reports;
}

}  // namespace kvjit::cli
