#ifndef KVJIT_RUNTIME_PROFILE_TRACEWRITER_H_
#define KVJIT_RUNTIME_PROFILE_TRACEWRITER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "nlohmann/json.hpp"
#include "runtime/profile/StepProfiler.h"

namespace kvjit::runtime {

// A span of time on one track (process `pid`, thread `tid`).
struct TraceEvent {
  std::string name;
  std::string category;
  int pid = 0;
  int tid = 0;
  int64_t start_ns = 0;
  int64_t duration_ns = 0;
  nlohmann::json args = nlohmann::json::object();
};

// A trace in the Trace Event JSON format that chrome://tracing and Perfetto
// open: each span a complete ("X") event, microseconds with nanosecond
// decimals; tracks named by metadata ("M") events.
class TraceBuilder {
 public:
  void NameProcess(int pid, const std::string& name);
  void NameThread(int pid, int tid, const std::string& name);
  void Add(TraceEvent event);

  nlohmann::json ToJson() const;
  // Writes ToJson() to `path`; errors name the file.
  absl::Status WriteTo(const std::string& path) const;

 private:
  nlohmann::json metadata_ = nlohmann::json::array();
  std::vector<TraceEvent> events_;
};

// The profiler's last step of each phase that ran, as process `pid` named
// `process_name`: one track per phase, the step as one event and each
// instruction as an event nested in it, with its cost as arguments. The
// runner times the steps on one thread (its pool's workers split each
// instruction), so a track is a step, not a worker.
void AddStepTimelines(const StepProfiler& profiler, int pid, const std::string& process_name,
                      TraceBuilder& trace);

}  // namespace kvjit::runtime

#endif  // KVJIT_RUNTIME_PROFILE_TRACEWRITER_H_
