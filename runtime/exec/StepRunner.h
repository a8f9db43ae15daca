#ifndef KVJIT_RUNTIME_EXEC_STEPRUNNER_H_
#define KVJIT_RUNTIME_EXEC_STEPRUNNER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "runtime/cpu/MatMul.h"
#include "runtime/cpu/PagedAttention.h"
#include "runtime/cpu/ThreadPool.h"
#include "runtime/core/PageBuffer.h"
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

// Runs an executable's step program on the CPU: one activation arena sized by
// the compiler's memory plan, one paged KV pool of `num_blocks` blocks in the
// executable's layout, and the kernels of runtime/cpu.
class CpuStepRunner final : public StepRunner {
 public:
  static absl::StatusOr<std::unique_ptr<CpuStepRunner>> Create(const Executable& executable,
                                                               int64_t num_blocks, int threads);

  int64_t num_blocks() const override { return num_blocks_; }
  int64_t vocab_size() const override { return vocab_size_; }
  int64_t max_tokens_per_step() const override { return executable_.program().max_tokens(); }
  int64_t block_size() const override { return kv_layout_.block_size; }
  absl::Status CopyBlock(int64_t source, int64_t destination) override;
  absl::StatusOr<absl::Span<const float>> Run(const StepInputs& inputs) override;
  RunnerMemory Memory() const override;
  absl::Status SetObserver(StepObserver* observer) override;

 private:
  CpuStepRunner(const Executable& executable, int64_t num_blocks, int threads);

  int64_t ElementCount(const kvx::TensorRef& ref, const StepSizes& sizes) const;
  absl::StatusOr<float*> Floats(const kvx::TensorRef& ref);
  absl::StatusOr<const int32_t*> Ints(const kvx::TensorRef& ref, const StepInputs& inputs) const;
  absl::StatusOr<cpu::WeightView> Matrix(const kvx::TensorRef& ref) const;
  absl::Status Execute(const kvx::Instruction& instruction, const StepInputs& inputs,
                       const StepSizes& sizes);
  absl::Status ExecuteElementwise(const kvx::Instruction& instruction, const StepSizes& sizes);

  const Executable& executable_;
  int64_t num_blocks_;
  int64_t vocab_size_ = 0;
  cpu::PagedKvLayout kv_layout_;
  cpu::ThreadPool pool_;
  PageBuffer arena_;
  PageBuffer kv_pool_;
  // Weights read as f32 vectors (norm weights, biases), dequantized once.
  std::map<uint32_t, std::vector<float>> vector_weights_;
  StepObserver* observer_ = nullptr;
};

}  // namespace kvjit::runtime

#endif  // KVJIT_RUNTIME_EXEC_STEPRUNNER_H_
