#ifndef KVJIT_RUNTIME_PROFILE_STEPPROFILER_H_
#define KVJIT_RUNTIME_PROFILE_STEPPROFILER_H_

#include <cstdint>
#include <vector>

#include "runtime/exec/Executable.h"
#include "runtime/exec/InstructionCost.h"
#include "runtime/exec/StepObserver.h"

namespace kvjit::runtime {

// Steps that compute some sequence's prompt (prefill; in a batch with
// decode tokens too) and steps of one new token per sequence (decode).
enum class StepPhase { kPrefill, kDecode };
inline constexpr StepPhase kStepPhases[] = {StepPhase::kPrefill, StepPhase::kDecode};
const char* StepPhaseName(StepPhase phase);

// One program instruction over a phase's steps: time and cost, summed.
struct InstructionTotals {
  int64_t nanoseconds = 0;
  InstructionCost cost;
};

// Where one step's time went: each instruction's start and end, in
// nanoseconds from the step's start (its first instruction's).
struct StepTimeline {
  StepSizes sizes;
  std::vector<InstructionCost> costs;
  std::vector<std::pair<int64_t, int64_t>> instruction_spans;
  int64_t nanoseconds() const {
    return instruction_spans.empty() ? 0 : instruction_spans.back().second;
  }
};

struct PhaseProfile {
  int64_t steps = 0;
  int64_t tokens = 0;
  // From each step's first instruction's start to its last one's end.
  int64_t nanoseconds = 0;
  std::vector<InstructionTotals> instructions;  // by program index
  StepTimeline last_step;
};

// A StepObserver that sums each instruction's time and cost (runtime's
// CostOf) per phase, and keeps the last step of each phase as a timeline.
// Its own work runs between steps, outside the times it records.
class StepProfiler final : public StepObserver {
 public:
  explicit StepProfiler(const kvx::Executable& executable);

  void StepBegan(const StepInputs& inputs) override;
  void InstructionRan(size_t index, Clock::time_point start, Clock::time_point end) override;
  void StepEnded() override;

  const kvx::Executable& executable() const { return executable_; }
  const PhaseProfile& phase(StepPhase phase) const {
    return phases_[static_cast<int>(phase)];
  }

 private:
  const kvx::Executable& executable_;
  PhaseProfile phases_[2];
  StepSizes sizes_;
  AttentionExtent attention_;
  std::vector<std::pair<Clock::time_point, Clock::time_point>> spans_;
};

}  // namespace kvjit::runtime

#endif  // KVJIT_RUNTIME_PROFILE_STEPPROFILER_H_
