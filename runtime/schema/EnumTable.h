#ifndef KVJIT_RUNTIME_SCHEMA_ENUMTABLE_H_
#define KVJIT_RUNTIME_SCHEMA_ENUMTABLE_H_

#include <cstddef>

namespace kvjit::kvx {

// Whether `table` has one entry per value of an enum with a MAX enumerator (a
// kvx.fbs enum, or an operand enum of OpOperands.h), the enum being each
// entry's `key` member, in the enum's order: entry i is value i. Tables
// state this in a static_assert, so that a new enumerator without its entry,
// or entries out of order, fail to compile: the elementwise steps
// (runtime/exec/ElementwiseOpTable.h, keyed by `op`), the step inputs
// (StepContract.h) and the operands the lowering emits
// (codegen/lowering/OperandTable.h); the opcodes' tables check theirs with
// runtime/ops/RowOps.h.
template <typename Entry, size_t N, typename Enum>
constexpr bool CoversEnumInOrder(const Entry (&table)[N], Enum Entry::*key) {
  for (size_t i = 0; i < N; ++i) {
    if (table[i].*key != static_cast<Enum>(i)) return false;
  }
  return N == static_cast<size_t>(Enum::MAX) + 1;
}

template <typename Entry, size_t N>
constexpr bool CoversEnumInOrder(const Entry (&table)[N]) {
  return CoversEnumInOrder(table, &Entry::op);
}

}  // namespace kvjit::kvx

#endif  // KVJIT_RUNTIME_SCHEMA_ENUMTABLE_H_
