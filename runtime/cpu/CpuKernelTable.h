#ifndef KVJIT_RUNTIME_CPU_CPUKERNELTABLE_H_
#define KVJIT_RUNTIME_CPU_CPUKERNELTABLE_H_

#include <cstdint>
#include <type_traits>

#include "absl/status/statusor.h"
#include "runtime/cpu/MatMul.h"
#include "runtime/cpu/PagedAttention.h"
#include "runtime/cpu/Rope.h"
#include "runtime/cpu/ThreadPool.h"
#include "runtime/dist/Communicator.h"
#include "runtime/exec/Executable.h"
#include "runtime/exec/StepRunner.h"
#include "runtime/schema/OpOperands.h"
#include "runtime/schema/kvx_generated.h"

// The CPU kernel of each opcode, found by the CPU runner through CpuKernelOf:
// a row-wise opcode's in its file under runtime/ops, the others' in
// CpuKernelTable.cpp.
namespace kvjit::runtime {

// Host memory behind an instruction's tensor references, as the CPU runner
// holds it (its arena, the weights, the step's inputs).
class CpuOperands {
 public:
  virtual ~CpuOperands() = default;
  // An arena tensor, or a weight as f32 (dequantized once where stored
  // otherwise).
  virtual absl::StatusOr<float*> Floats(const kvx::TensorRef& ref) = 0;
  // A step input.
  virtual absl::StatusOr<const int32_t*> Ints(const kvx::TensorRef& ref,
                                              const StepInputs& inputs) const = 0;
  // A weight matrix in its stored type.
  virtual absl::StatusOr<cpu::WeightView> Matrix(const kvx::TensorRef& ref) const = 0;
};

// The paged KV pool the cache's kernels read and write.
struct CpuKvPool {
  const cpu::PagedKvLayout& layout;
  uint8_t* data;
  int64_t num_blocks;
};

// One instruction of a step, as its kernel sees it.
struct CpuOpContext {
  const kvx::Instruction& instruction;
  const StepInputs& inputs;
  const StepSizes& sizes;
  CpuOperands& operands;
  cpu::ThreadPool& pool;
  CpuKvPool kv;
  // The step's Rope angles, shared by its Rope instructions.
  cpu::RopeAngles& rope_angles;
  // The tensor-parallel ranks' collectives; null for a model run by one
  // process.
  dist::Communicator* communicator = nullptr;

  // An input by its operand's name (runtime/schema/OpOperands.h).
  template <typename Operand>
  const kvx::TensorRef& input(Operand operand) const {
    static_assert(std::is_enum_v<Operand>, "inputs are read by their names in OpOperands.h");
    return kvx::InputOf(instruction, operand);
  }
  const kvx::TensorRef& output(int i) const { return *instruction.outputs()->Get(i); }
  absl::StatusOr<float*> Floats(const kvx::TensorRef& ref) { return operands.Floats(ref); }
  absl::StatusOr<const int32_t*> Ints(const kvx::TensorRef& ref) const {
    return operands.Ints(ref, inputs);
  }
  absl::StatusOr<cpu::WeightView> Matrix(const kvx::TensorRef& ref) const {
    return operands.Matrix(ref);
  }
  // Elements of `ref` in this step, and the extent of its dimension `dim`.
  int64_t Elements(const kvx::TensorRef& ref) const {
    int64_t count = 1;
    for (const kvx::Dim* dim : *ref.shape()) count *= DimExtent(dim->kind(), dim->size(), sizes);
    return count;
  }
  int64_t Extent(const kvx::TensorRef& ref, int dim) const {
    const kvx::Dim& d = *ref.shape()->Get(dim);
    return DimExtent(d.kind(), d.size(), sizes);
  }
  // The last dimension of `ref`: the row width of row-wise kernels.
  int64_t Width(const kvx::TensorRef& ref) const {
    return Extent(ref, static_cast<int>(ref.shape()->size()) - 1);
  }
};

using CpuKernel = absl::Status (*)(CpuOpContext& context);

// The CPU kernel of `op`, or null for a value no opcode has.
CpuKernel CpuKernelOf(kvx::OpCode op);

}  // namespace kvjit::runtime

#endif  // KVJIT_RUNTIME_CPU_CPUKERNELTABLE_H_
