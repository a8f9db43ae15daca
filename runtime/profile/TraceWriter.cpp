#include "runtime/profile/TraceWriter.h"

#include <fstream>

#include "absl/strings/str_cat.h"
#include "runtime/profile/ProfileSummary.h"

namespace kvjit::runtime {
namespace {

double Microseconds(int64_t nanoseconds) { return nanoseconds / 1e3; }

std::string Counted(int64_t count, const char* noun) {
  return absl::StrCat(count, " ", noun, count == 1 ? "" : "s");
}

}  // namespace

void TraceBuilder::NameProcess(int pid, const std::string& name) {
  metadata_.push_back(
      {{"name", "process_name"}, {"ph", "M"}, {"pid", pid}, {"tid", 0}, {"args", {{"name", name}}}});
}

void TraceBuilder::NameThread(int pid, int tid, const std::string& name) {
  metadata_.push_back(
      {{"name", "thread_name"}, {"ph", "M"}, {"pid", pid}, {"tid", tid}, {"args", {{"name", name}}}});
}

void TraceBuilder::Add(TraceEvent event) { events_.push_back(std::move(event)); }

nlohmann::json TraceBuilder::ToJson() const {
  nlohmann::json events = metadata_;
  for (const TraceEvent& event : events_) {
    events.push_back({{"name", event.name},
                      {"cat", event.category},
                      {"ph", "X"},
                      {"pid", event.pid},
                      {"tid", event.tid},
                      {"ts", Microseconds(event.start_ns)},
                      {"dur", Microseconds(event.duration_ns)},
                      {"args", event.args}});
  }
  return {{"traceEvents", events}, {"displayTimeUnit", "ns"}};
}

absl::Status TraceBuilder::WriteTo(const std::string& path) const {
  std::ofstream file(path);
  file << ToJson().dump() << "\n";
  if (!file) return absl::InternalError(absl::StrCat("cannot write the trace to ", path));
  return absl::OkStatus();
}

void AddStepTimelines(const StepProfiler& profiler, int pid, const std::string& process_name,
                      TraceBuilder& trace) {
  const kvx::Executable& executable = profiler.executable();
  const auto& instructions = *executable.program()->instructions();
  trace.NameProcess(pid, process_name);
  int tid = 0;
  for (StepPhase phase : kStepPhases) {
    const PhaseProfile& profile = profiler.phase(phase);
    if (profile.steps == 0) continue;
    const StepTimeline& step = profile.last_step;
    ++tid;
    trace.NameThread(pid, tid, absl::StrCat(StepPhaseName(phase), " step"));
    trace.Add({absl::StrCat(StepPhaseName(phase), " step: ", Counted(step.sizes.tokens, "token"),
                            ", ", Counted(step.sizes.sequences, "sequence")),
               "step", pid, tid, 0, step.nanoseconds(),
               {{"tokens", step.sizes.tokens}, {"sequences", step.sizes.sequences}}});
    for (size_t i = 0; i < step.instruction_spans.size(); ++i) {
      const auto [start, end] = step.instruction_spans[i];
      const InstructionCost& cost = step.costs[i];
      trace.Add({InstructionName(executable, *instructions[i]),
                 kvx::EnumNameOpCode(instructions[i]->op()), pid, tid, start, end - start,
                 {{"index", i},
                  {"weight_bytes", cost.weight_bytes},
                  {"activation_bytes", cost.activation_bytes},
                  {"kv_bytes", cost.kv_bytes},
                  {"flops", cost.flops}}});
    }
  }
}

}  // namespace kvjit::runtime
