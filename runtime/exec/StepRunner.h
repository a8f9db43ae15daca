#ifndef KVJIT_RUNTIME_EXEC_STEPRUNNER_H_
#define KVJIT_RUNTIME_EXEC_STEPRUNNER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "runtime/exec/Executable.h"
#include "runtime/exec/StepInputs.h"
#include "runtime/exec/StepObserver.h"

namespace kvjit::runtime {

// The host memory a runner holds: what it reserved and how much of that is
// resident (backed by memory) now.
struct RunnerMemory {
  uint64_t kv_pool_bytes = 0;
  uint64_t kv_pool_resident = 0;
  // The activation arena, the logits rows included (the plan reuses their
  // bytes for other values earlier in the step).
  uint64_t arena_bytes = 0;
  uint64_t arena_resident = 0;
  // Weights the runner holds in another form than the model file's (norm
  // weights and biases dequantized to f32).
  uint64_t weight_copies = 0;
};

// Runs an executable's step program on one backend over its own paged KV
// pool; the engines (generator, scheduler, beam search) drive any backend
// through this interface.
class StepRunner {
 public:
  virtual ~StepRunner() = default;

  // The host memory the runner holds; none for one that keeps its pool and
  // arena elsewhere (a GPU's) or has none (a test's).
  virtual RunnerMemory Memory() const { return {}; }

  virtual int64_t num_blocks() const = 0;
  virtual int64_t vocab_size() const = 0;
  virtual int64_t max_tokens_per_step() const = 0;
  virtual int64_t block_size() const = 0;
  // Executable::AttentionWindow of the program run: a sequence's blocks
  // wholly before its next position - window + 1 are never read again. 0
  // (every position stays readable) for a runner whose program has no
  // sliding window.
  virtual int64_t attention_window() const { return 0; }
  // A decode step of `tokens` tokens' time as a multiple of a one-token
  // step's: speculative decoding drafts only while the tokens a verify step
  // is likely to keep are worth its time (DraftPolicy). 1 for a backend
  // whose decode steps are bound by reading the weights, so that a few more
  // tokens cost next to nothing (a GPU's, by that reasoning; not measured
  // yet).
  virtual double decode_step_cost(int64_t tokens) const {
    (void)tokens;
    return 1.0;
  }

  // Copies every slot of KV block `source` into block `destination` (the
  // copy-on-write of a block that forked sequences shared); run before the
  // step that writes into `destination`.
  virtual absl::Status CopyBlock(int64_t source, int64_t destination) = 0;

  // Runs one step; the logits [L, vocab] stay valid until the next call.
  virtual absl::StatusOr<absl::Span<const float>> Run(const StepInputs& inputs) = 0;

  // Reports the steps run from now on to `observer` (not owned; null stops
  // reporting). A backend that cannot time its instructions says so.
  virtual absl::Status SetObserver(StepObserver* observer) {
    if (observer == nullptr) return absl::OkStatus();
    return absl::UnimplementedError(
        "this backend does not time its steps' instructions; the CPU backend does (--device cpu)");
  }
};

}  // namespace kvjit::runtime

#endif  // KVJIT_RUNTIME_EXEC_STEPRUNNER_H_
