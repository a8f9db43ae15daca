#ifndef KVJIT_RUNTIME_SCHEMA_ENUMTABLE_H_
#define KVJIT_RUNTIME_SCHEMA_ENUMTABLE_H_

#include <cstddef>

namespace kvjit::kvx {

// Whether `table` has one entry per value of a kvx.fbs enum (the type of
// each entry's `op`), in the enum's order: entry i is value i. The table of
// the elementwise steps (runtime/exec/ElementwiseOpTable.h) states this in a
// static_assert, so that a new enumerator without its entry fails to
// compile; the opcodes' tables check theirs with runtime/ops/RowOps.h.
template <typename Entry, size_t N>
constexpr bool CoversEnumInOrder(const Entry (&table)[N]) {
  using Enum = decltype(Entry::op);
  for (size_t i = 0; i < N; ++i) {
    if (table[i].op != static_cast<Enum>(i)) return false;
  }
  return N == static_cast<size_t>(Enum::MAX) + 1;
}

}  // namespace kvjit::kvx

#endif  // KVJIT_RUNTIME_SCHEMA_ENUMTABLE_H_
