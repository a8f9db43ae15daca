#ifndef KVJIT_RUNTIME_EXEC_ELEMENTWISEOPTABLE_H_
#define KVJIT_RUNTIME_EXEC_ELEMENTWISEOPTABLE_H_

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <iterator>

#include "runtime/schema/EnumTable.h"
#include "runtime/schema/kvx_generated.h"

// The runtime's one description of each step of an elementwise chain
// (kvx.fbs ElementwiseOpCode), read by the loader (a step's opcode must be
// here), the cost model (its flops) and the CPU kernel (its arithmetic, in
// runtime/cpu/CpuKernelTable.cpp). A new elementwise op is one entry here
// and its CUDA expression in codegen/cuda/RowKernels.cpp.
namespace kvjit::runtime {

struct ElementwiseOpDescription {
  kvx::ElementwiseOpCode op;
  // Flops per element, for the cost model and the profiler.
  uint64_t flops;
  // One element as the CPU computes it, from the step's `lhs` and `rhs`
  // (which a unary op ignores) and its `factor`; null for the ops whose CPU
  // kernel is a vector kernel of runtime/cpu/RowKernels (the CPU kernel
  // table names them), which a scalar form here would not match bit for bit.
  float (*scalar)(float lhs, float rhs, float factor);
};

namespace elementwise {

// GELU in its exact (erf) form, in double. (Its tanh form, and tanh itself,
// are vector kernels of runtime/cpu/RowKernels.)
inline float GeluErf(float x, float, float) {
  return static_cast<float>(0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))));
}

}  // namespace elementwise

// In ElementwiseOpCode order. Silu's flops: x / (1 + exp(-x)); Gelu's
// 0.5·x·(1 + erf(x/√2)); its tanh form has a cubic inside the tanh.
inline constexpr ElementwiseOpDescription kElementwiseOps[] = {
    {kvx::ElementwiseOpCode::Add, 1, nullptr},
    {kvx::ElementwiseOpCode::Mul, 1, nullptr},
    {kvx::ElementwiseOpCode::Scale, 1, nullptr},
    {kvx::ElementwiseOpCode::Silu, 3, nullptr},
    {kvx::ElementwiseOpCode::Gelu, 5, elementwise::GeluErf},
    {kvx::ElementwiseOpCode::GeluTanh, 9, nullptr},
    {kvx::ElementwiseOpCode::Tanh, 4, nullptr},
};

static_assert(kvx::CoversEnumInOrder(kElementwiseOps),
              "kElementwiseOps describes each kvx::ElementwiseOpCode once, in the enum's order: a "
              "new elementwise opcode needs its entry here");

// The description of `op`, or null for a value no opcode has (an executable
// from a newer compiler).
constexpr const ElementwiseOpDescription* FindElementwiseOp(kvx::ElementwiseOpCode op) {
  const size_t index = static_cast<size_t>(op);
  return index < std::size(kElementwiseOps) ? &kElementwiseOps[index] : nullptr;
}

}  // namespace kvjit::runtime

#endif  // KVJIT_RUNTIME_EXEC_ELEMENTWISEOPTABLE_H_
