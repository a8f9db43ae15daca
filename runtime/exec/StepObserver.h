#ifndef KVJIT_RUNTIME_EXEC_STEPOBSERVER_H_
#define KVJIT_RUNTIME_EXEC_STEPOBSERVER_H_

#include <chrono>
#include <cstddef>

namespace kvjit::runtime {

struct StepInputs;

// Watches a runner execute its step program, instruction by instruction (a
// profiler). A runner without an observer pays one null check per step;
// with one, it reads the clock around each instruction and calls these on
// the thread that runs the step.
class StepObserver {
 public:
  using Clock = std::chrono::steady_clock;

  virtual ~StepObserver() = default;

  // Before the step's first instruction.
  virtual void StepBegan(const StepInputs& inputs) = 0;
  // After program instruction `index` ran from `start` to `end`.
  virtual void InstructionRan(size_t index, Clock::time_point start, Clock::time_point end) = 0;
  // After the step's last instruction; not called for a step that failed.
  virtual void StepEnded() = 0;
};

}  // namespace kvjit::runtime

#endif  // KVJIT_RUNTIME_EXEC_STEPOBSERVER_H_
