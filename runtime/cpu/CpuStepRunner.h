#ifndef KVJIT_RUNTIME_CPU_CPUSTEPRUNNER_H_
#define KVJIT_RUNTIME_CPU_CPUSTEPRUNNER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "runtime/core/PageBuffer.h"
#include "runtime/cpu/CpuKernelTable.h"
#include "runtime/cpu/MatMul.h"
#include "runtime/cpu/PagedAttention.h"
#include "runtime/cpu/Rope.h"
#include "runtime/cpu/ThreadPool.h"
#include "runtime/dist/Communicator.h"
#include "runtime/exec/Executable.h"
#include "runtime/exec/StepObserver.h"
#include "runtime/exec/StepRunner.h"

namespace kvjit::runtime {

// Runs an executable's step program on the CPU: one activation arena sized by
// the compiler's memory plan, one paged KV pool of `num_blocks` blocks in the
// executable's layout, and the kernels of runtime/cpu, one per opcode
// (CpuKernelTable.h). A step is checked before any kernel runs, as every
// runner checks it (runtime/exec/StepValidation.h).
class CpuStepRunner final : public StepRunner, private CpuOperands {
 public:
  // `communicator` carries the collectives of one rank of a tensor-parallel
  // executable, which needs it (its ranks and rank must be the executable's);
  // null for any other.
  static absl::StatusOr<std::unique_ptr<CpuStepRunner>> Create(
      const Executable& executable, int64_t num_blocks, int threads,
      dist::Communicator* communicator = nullptr);

  // A runner of `executable` over `target`'s KV pool instead of a pool of its
  // own: its layers are the first layers of target's blocks, which must store
  // them alike (heads, head size, block size, types, rotations). The
  // layer-skipping self-draft runs this way: the target's first layers'
  // keys and values are the draft's, so neither computes them twice.
  // `target` must outlive the runner.
  static absl::StatusOr<std::unique_ptr<CpuStepRunner>> CreateOverPool(const Executable& executable,
                                                                       CpuStepRunner& target,
                                                                       int threads);

  int64_t num_blocks() const override { return num_blocks_; }
  int64_t vocab_size() const override { return vocab_size_; }
  int64_t max_tokens_per_step() const override { return executable_.program().max_tokens(); }
  int64_t block_size() const override { return kv_layout_.block_size; }
  int64_t attention_window() const override { return executable_.AttentionWindow(); }
  // Measured on SmolLM2-135M Q4_1 (docs/speculative-decoding.md): the
  // small-M GEMMs are bound by their arithmetic, not by reading the
  // weights, so each token adds most of a one-token step.
  double decode_step_cost(int64_t tokens) const override;
  absl::Status CopyBlock(int64_t source, int64_t destination) override;
  absl::StatusOr<absl::Span<const float>> Run(const StepInputs& inputs) override;
  RunnerMemory Memory() const override;
  absl::Status SetObserver(StepObserver* observer) override;

 private:
  CpuStepRunner(const Executable& executable, int64_t num_blocks, int threads);

  absl::StatusOr<float*> Floats(const kvx::TensorRef& ref) override;
  absl::StatusOr<const int32_t*> Ints(const kvx::TensorRef& ref,
                                      const StepInputs& inputs) const override;
  absl::StatusOr<cpu::WeightView> Matrix(const kvx::TensorRef& ref) const override;

  const Executable& executable_;
  int64_t num_blocks_;
  int64_t vocab_size_ = 0;
  cpu::PagedKvLayout kv_layout_;
  cpu::ThreadPool pool_;
  PageBuffer arena_;
  // Empty for a runner over another's pool.
  PageBuffer kv_pool_;
  // The pool the kernels read and write: kv_pool_'s or the target's.
  uint8_t* kv_data_ = nullptr;
  // Weights read as f32 vectors (norm weights, biases), dequantized once.
  std::map<uint32_t, std::vector<float>> vector_weights_;
  // The current step's Rope angles, cleared as each step begins.
  cpu::RopeAngles rope_angles_;
  StepObserver* observer_ = nullptr;
  dist::Communicator* communicator_ = nullptr;
};

}  // namespace kvjit::runtime

#endif  // KVJIT_RUNTIME_CPU_CPUSTEPRUNNER_H_
