#include "runtime/profile/StepProfiler.h"

#include "runtime/exec/StepRunner.h"

namespace kvjit::runtime {

const char* StepPhaseName(StepPhase phase) {
  return phase == StepPhase::kPrefill ? "prefill" : "decode";
}

StepProfiler::StepProfiler(const kvx::Executable& executable)
    : executable_(executable), spans_(executable.program()->instructions()->size()) {
  for (PhaseProfile& phase : phases_) phase.instructions.resize(spans_.size());
}

void StepProfiler::StepBegan(const StepInputs& inputs) {
  sizes_ = SizesOf(inputs);
  attention_ = AttentionExtentOf(inputs.positions(), inputs.context_lens());
}

void StepProfiler::InstructionRan(size_t index, Clock::time_point start, Clock::time_point end) {
  spans_[index] = {start, end};
}

void StepProfiler::StepEnded() {
  if (spans_.empty()) return;
  PhaseProfile& phase = phases_[static_cast<int>(
      sizes_.tokens == sizes_.sequences ? StepPhase::kDecode : StepPhase::kPrefill)];
  auto since = [](Clock::time_point from, Clock::time_point to) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(to - from).count();
  };
  const Clock::time_point step_start = spans_.front().first;
  const auto& instructions = *executable_.program()->instructions();
  StepTimeline& timeline = phase.last_step;
  timeline.sizes = sizes_;
  timeline.costs.resize(spans_.size());
  timeline.instruction_spans.resize(spans_.size());
  for (size_t i = 0; i < spans_.size(); ++i) {
    const InstructionCost cost = CostOf(executable_, *instructions[i], sizes_, attention_);
    phase.instructions[i].nanoseconds += since(spans_[i].first, spans_[i].second);
    phase.instructions[i].cost += cost;
    timeline.costs[i] = cost;
    timeline.instruction_spans[i] = {since(step_start, spans_[i].first),
                                     since(step_start, spans_[i].second)};
  }
  ++phase.steps;
  phase.tokens += sizes_.tokens;
  phase.nanoseconds += timeline.nanoseconds();
}

}  // namespace kvjit::runtime
