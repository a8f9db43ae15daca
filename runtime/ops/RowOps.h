#ifndef KVJIT_RUNTIME_OPS_ROWOPS_H_
#define KVJIT_RUNTIME_OPS_ROWOPS_H_

#include <cstddef>
#include <utility>

#include "absl/status/status.h"
#include "runtime/cpu/CpuKernelTable.h"
#include "runtime/exec/OpTable.h"
#include "runtime/schema/kvx_generated.h"

// The row-wise opcodes (kvx.fbs OpCode): each has one file,
// runtime/ops/<Name>.cpp, that defines k<Name>Op, its whole runtime
// description, read by the loader and the cost model (through FindOp) and
// the CPU runner (CpuKernelOf). A new row-wise opcode is its file and its
// name here, and its CUDA kernel's emitter in codegen/cuda/rowops (whose
// table fails to compile without it).
#define KVJIT_ROW_OPS(X) X(RmsNorm) X(AddRmsNorm) X(SwiGlu) X(Rope)

namespace kvjit::runtime {

struct RowOp {
  // Arity, parameters, checks, output-shape rule and cost.
  OpDescription description;
  CpuKernel cpu;
};

#define KVJIT_DECLARE_ROW_OP(name) extern const RowOp k##name##Op;
KVJIT_ROW_OPS(KVJIT_DECLARE_ROW_OP)
#undef KVJIT_DECLARE_ROW_OP

// The description of row-wise opcode `op`; null for any other opcode.
inline const RowOp* FindRowOp(kvx::OpCode op) {
  switch (op) {
#define KVJIT_ROW_OP_CASE(name) \
  case kvx::OpCode::name:       \
    return &k##name##Op;
    KVJIT_ROW_OPS(KVJIT_ROW_OP_CASE)
#undef KVJIT_ROW_OP_CASE
    default:
      return nullptr;
  }
}

inline constexpr kvx::OpCode kRowOpCodes[] = {
#define KVJIT_ROW_OPCODE(name) kvx::OpCode::name,
    KVJIT_ROW_OPS(KVJIT_ROW_OPCODE)
#undef KVJIT_ROW_OPCODE
};

// ---- Every opcode described once ----
//
// Each table of the opcodes that are not row-wise (the op table, the CPU
// kernels) states
//   static_assert(DescribesEveryOpCodeOnce<kTable>());
// so that an opcode described by none or by two fails to compile with
// OpCodeDescribedOnce<kvx::OpCode::TheOpcode, count> in the error.

template <kvx::OpCode kOp, size_t kDescriptions>
struct OpCodeDescribedOnce {
  static_assert(kDescriptions == 1,
                "a kvx::OpCode (the first template argument) needs exactly one "
                "description: a "
                "row-wise op in KVJIT_ROW_OPS (runtime/ops/RowOps.h) or an "
                "entry of this table");
  static constexpr bool value = true;
};

template <typename Entry, size_t N>
constexpr size_t DescriptionsOf(const Entry (&table)[N], kvx::OpCode op) {
  size_t count = 0;
  for (const Entry& entry : table) count += entry.op == op ? 1 : 0;
  for (kvx::OpCode row : kRowOpCodes) count += row == op ? 1 : 0;
  return count;
}

template <const auto& kTable, size_t... kOps>
constexpr bool EachDescribedOnce(std::index_sequence<kOps...>) {
  return (OpCodeDescribedOnce<static_cast<kvx::OpCode>(kOps),
                              DescriptionsOf(kTable, static_cast<kvx::OpCode>(kOps))>::value &&
          ...);
}

template <const auto& kTable>
constexpr bool DescribesEveryOpCodeOnce() {
  return EachDescribedOnce<kTable>(
      std::make_index_sequence<static_cast<size_t>(kvx::OpCode::MAX) + 1>());
}

}  // namespace kvjit::runtime

#endif  // KVJIT_RUNTIME_OPS_ROWOPS_H_
