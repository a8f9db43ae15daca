#include "runtime/exec/InstructionCost.h"

#include <algorithm>

namespace kvjit::runtime {
namespace {

int64_t Elements(const kvx::Executable& executable, const kvx::TensorRef& ref,
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

int64_t Extent(const kvx::TensorRef& ref, int axis, const StepSizes& sizes) {
  if (ref.shape() == nullptr || static_cast<int>(ref.shape()->size()) <= axis) return 1;
  const kvx::Dim& dim = *ref.shape()->Get(axis);
  return DimExtent(dim.kind(), dim.size(), sizes);
}

int64_t KvElementBytes(kvx::StorageType type) { return type == kvx::StorageType::F32 ? 4 : 2; }

// Flops per element of each elementwise op: Silu is x / (1 + exp(-x)); Gelu
// 0.5·x·(1 + erf(x/√2)); its tanh form has a cubic inside the tanh.
uint64_t ElementwiseFlops(kvx::ElementwiseOpCode op) {
  switch (op) {
    case kvx::ElementwiseOpCode::Add:
    case kvx::ElementwiseOpCode::Mul:
    case kvx::ElementwiseOpCode::Scale:
      return 1;
    case kvx::ElementwiseOpCode::Silu:
      return 3;
    case kvx::ElementwiseOpCode::Gelu:
      return 5;
    case kvx::ElementwiseOpCode::GeluTanh:
      return 9;
  }
  return 1;
}

}  // namespace

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
  return *this;
}

InstructionCost CostOf(const kvx::Executable& executable, const kvx::Instruction& instruction,
                       const StepSizes& sizes, const AttentionExtent& attention) {
  InstructionCost cost;
  const auto& inputs = *instruction.inputs();
  const auto& outputs = *instruction.outputs();
  // Activations: every non-weight operand and result, read or written once
  // (a Copy into its own bytes moves nothing).
  const bool in_place_copy = instruction.op() == kvx::OpCode::Copy &&
                             inputs[0]->kind() == kvx::BufferKind::Arena &&
                             outputs[0]->kind() == kvx::BufferKind::Arena &&
                             inputs[0]->offset() == outputs[0]->offset();
  if (!in_place_copy) {
    for (const auto* refs : {&inputs, &outputs}) {
      for (const kvx::TensorRef* ref : *refs) {
        if (ref->kind() != kvx::BufferKind::Weight) {
          cost.activation_bytes += Elements(executable, *ref, sizes) * 4;
        }
      }
    }
  }
  for (const kvx::TensorRef* ref : inputs) {
    if (ref->kind() != kvx::BufferKind::Weight) continue;
    const kvx::Weight& weight = *executable.weights()->Get(ref->index());
    if (instruction.op() == kvx::OpCode::Embedding && weight.shape() != nullptr &&
        weight.shape()->size() > 0 && weight.shape()->Get(0) > 0) {
      const int64_t rows = weight.shape()->Get(0);
      cost.weight_bytes += weight.size_bytes() / rows * std::min(sizes.tokens, rows);
    } else {
      cost.weight_bytes += weight.size_bytes();
    }
  }

  const kvx::KvLayout* kv = executable.kv_layout();
  const int64_t kv_row_bytes =
      kv == nullptr ? 0 : int64_t{kv->num_kv_heads()} * kv->head_dim() * KvElementBytes(kv->element_type());
  const int64_t n = outputs.size() > 0 ? Elements(executable, *outputs[0], sizes) : 0;
  switch (instruction.op()) {
    case kvx::OpCode::Embedding:
    case kvx::OpCode::GatherRows:
    case kvx::OpCode::Copy:
      break;
    case kvx::OpCode::Linear: {
      const kvx::Weight& weight = *executable.weights()->Get(inputs[1]->index());
      const int64_t out_features = weight.shape()->Get(0), in_features = weight.shape()->Get(1);
      const int64_t rows = Elements(executable, *inputs[0], sizes) / in_features;
      cost.flops = 2 * rows * in_features * out_features;
      if (inputs.size() > 2) cost.flops += rows * out_features;
      break;
    }
    case kvx::OpCode::RmsNorm:
      // x², their sum, the scaling and the weight's product per element.
      cost.flops = 4 * n;
      break;
    case kvx::OpCode::AddRmsNorm:
      cost.flops = 5 * n;
      break;
    case kvx::OpCode::SwiGlu:
      cost.flops = 4 * n;
      break;
    case kvx::OpCode::Rope: {
      // Each rotated pair: four multiplies and two adds.
      const int64_t head_dim = Extent(*inputs[0], 2, sizes);
      const int64_t rotary = instruction.rope() != nullptr && instruction.rope()->rotary_dim() > 0
                                 ? instruction.rope()->rotary_dim()
                                 : head_dim;
      cost.flops = 3 * (n / head_dim) * rotary;
      break;
    }
    case kvx::OpCode::Elementwise:
      if (instruction.elementwise() != nullptr) {
        for (const kvx::ElementwiseStep* step : *instruction.elementwise()) {
          cost.flops += ElementwiseFlops(step->op()) * n;
        }
      }
      break;
    case kvx::OpCode::KvWrite:
      cost.kv_bytes = 2 * sizes.tokens * kv_row_bytes;
      break;
    case kvx::OpCode::KvAttention: {
      // Each (query head, key) pair: the q·k and p·v dot products, and the
      // score's scaling, exp and sum; each query head's row is divided once.
      const int64_t heads = Extent(*inputs[0], 1, sizes);
      const int64_t head_dim = Extent(*inputs[0], 2, sizes);
      cost.kv_bytes = 2 * attention.cached_tokens * kv_row_bytes;
      cost.flops = heads * attention.query_key_pairs * (4 * head_dim + 3) +
                   sizes.tokens * heads * head_dim;
      break;
    }
  }
  return cost;
}

}  // namespace kvjit::runtime
