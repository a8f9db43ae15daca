#ifndef KVJIT_RUNTIME_EXEC_OPTABLE_H_
#define KVJIT_RUNTIME_EXEC_OPTABLE_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <type_traits>

#include "absl/status/status.h"
#include "runtime/exec/Executable.h"
#include "runtime/exec/InstructionCost.h"
#include "runtime/schema/OpOperands.h"
#include "runtime/schema/kvx_generated.h"

// The runtime's one description of each opcode, read by the loader (arity,
// operand and output-shape checks), the cost model and the profiler. A
// row-wise opcode's description and CPU kernel sit together in its file
// under runtime/ops (RowOps.h lists them), its CUDA emitter in its file
// under codegen/cuda/rowops; for the other
// opcodes the backends keep their own tables keyed by the same opcodes: the
// CPU kernels (runtime/cpu/CpuKernelTable.cpp) and the CUDA emitters
// (codegen/cuda/CudaCodegen.cpp). The steps of an Elementwise chain have a
// table of their own that all of these read (ElementwiseOpTable.h).
namespace kvjit::runtime {

// An instruction of a loaded program as an op's checks see it: arity, tensor
// references (in bounds of the arena, weights of the shapes they claim) and
// view rules were checked before.
struct OpCheckContext {
  const kvx::Executable& executable;
  const kvx::Instruction& instruction;

  // An input by its operand's name (runtime/schema/OpOperands.h).
  template <typename Operand>
  const kvx::TensorRef& input(Operand operand) const {
    static_assert(std::is_enum_v<Operand>, "inputs are read by their names in OpOperands.h");
    return kvx::InputOf(instruction, operand);
  }
  const kvx::TensorRef& output(size_t i) const { return *instruction.outputs()->Get(i); }
  size_t num_inputs() const { return instruction.inputs()->size(); }
  // Dimension `dim` of the weight `operand` refers to; -1 where it has none
  // (or `operand` is no weight).
  template <typename Operand>
  int64_t WeightDim(Operand operand, size_t dim) const {
    return WeightDimOf(input(operand), dim);
  }

 private:
  int64_t WeightDimOf(const kvx::TensorRef& ref, size_t dim) const;
};

// What the cost model knows before an op adds its own: the step's sizes, how
// far attention reaches, and the output's elements.
struct OpCostContext {
  const kvx::Executable& executable;
  const kvx::Instruction& instruction;
  const StepSizes& sizes;
  const AttentionExtent& attention;
  int64_t output_elements;
};

struct OpDescription {
  kvx::OpCode op;
  // Tensor operands read and written (KvWrite writes the cache, no tensor).
  size_t min_inputs, max_inputs, outputs;
  // The parameter table its instructions carry (kvx.fbs OpParams); NONE for
  // an op without parameters.
  kvx::OpParams params;
  // Whether the op's kernels read a column view of wider rows in place.
  bool reads_views;
  // The op's own checks (the output-shape rule among them) on an instruction
  // whose generic checks passed; the message says what is wrong, the loader
  // names the file and the instruction.
  absl::Status (*verify)(const OpCheckContext& context);
  // The op's flops and KV bytes, and any correction of the generic weight
  // and activation bytes already in `cost`.
  void (*cost)(const OpCostContext& context, InstructionCost& cost);
};

// The description of `op`, or null for a value no opcode has. Row-wise
// opcodes are described in runtime/ops (RowOps.h), the others in OpTable.cpp.
const OpDescription* FindOp(kvx::OpCode op);

// ---- What the descriptions' checks and costs share ----

// Same dimensions, kinds and static sizes.
bool SameShape(const kvx::TensorRef& a, const kvx::TensorRef& b);

// The static size of a reference's last dimension, or -1.
int64_t LastStaticDim(const kvx::TensorRef& ref);

// What the kernels write is sized by the inputs; the output references the
// arena was checked against must agree.
absl::Status OutputFits(bool fits);

// The [tokens, heads, head_dim] operand `head` of an op over heads; the
// cache's ops also need the KV layout's head_dim.
absl::Status HeadOperand(const OpCheckContext& context, const kvx::TensorRef& head,
                         bool of_the_cache);

// The extent of dimension `axis` of `ref` in a step of `sizes`; 1 past its
// rank.
int64_t Extent(const kvx::TensorRef& ref, int axis, const StepSizes& sizes);

// The KV cache layer an instruction reads or writes; none for an op that does
// not touch the cache.
std::optional<uint32_t> KvCacheLayer(const kvx::Instruction& instruction);

}  // namespace kvjit::runtime

#endif  // KVJIT_RUNTIME_EXEC_OPTABLE_H_
