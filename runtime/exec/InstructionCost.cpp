#include "runtime/exec/InstructionCost.h"

#include "runtime/exec/OpTable.h"

namespace kvjit::runtime {

int64_t ElementsOf(const kvx::Executable& executable, const kvx::TensorRef& ref,
                   const StepSizes& sizes) {
  int64_t count = 1;
  if (ref.kind() == kvx::BufferKind::Weight) {
    const kvx::Weight& weight = *executable.weights()->Get(ref.index());
    if (weight.shape() != nullptr) {
      for (int64_t dim : *weight.shape()) count *= dim;
    }
    return count;
  }
  if (ref.shape() == nullptr) return 0;
  for (const kvx::Dim* dim : *ref.shape()) count *= DimExtent(dim->kind(), dim->size(), sizes);
  return count;
}

AttentionExtent AttentionExtentOf(absl::Span<const int32_t> positions,
                                  absl::Span<const int32_t> context_lens) {
  AttentionExtent extent;
  for (int32_t position : positions) extent.query_key_pairs += int64_t{position} + 1;
  for (int32_t length : context_lens) extent.cached_tokens += length;
  return extent;
}

InstructionCost& InstructionCost::operator+=(const InstructionCost& other) {
  weight_bytes += other.weight_bytes;
  activation_bytes += other.activation_bytes;
  kv_bytes += other.kv_bytes;
  flops += other.flops;
  collective_bytes += other.collective_bytes;
  return *this;
}

InstructionCost CostOf(const kvx::Executable& executable, const kvx::Instruction& instruction,
                       const StepSizes& sizes, const AttentionExtent& attention) {
  InstructionCost cost;
  const auto& inputs = *instruction.inputs();
  const auto& outputs = *instruction.outputs();
  // Every non-weight operand and result, read or written once; every weight
  // whole. The op corrects what its kernel reads otherwise.
  for (const auto* refs : {&inputs, &outputs}) {
    for (const kvx::TensorRef* ref : *refs) {
      if (ref->kind() != kvx::BufferKind::Weight) {
        cost.activation_bytes += ElementsOf(executable, *ref, sizes) * 4;
      }
    }
  }
  for (const kvx::TensorRef* ref : inputs) {
    if (ref->kind() == kvx::BufferKind::Weight) {
      cost.weight_bytes += executable.weights()->Get(ref->index())->size_bytes();
    }
  }
  const int64_t output_elements =
      outputs.size() > 0 ? ElementsOf(executable, *outputs[0], sizes) : 0;
  if (const OpDescription* op = FindOp(instruction.op())) {
    op->cost({executable, instruction, sizes, attention, output_elements}, cost);
  }
  return cost;
}

}  // namespace kvjit::runtime
