#ifndef KVJIT_RUNTIME_SCHEMA_OPOPERANDS_H_
#define KVJIT_RUNTIME_SCHEMA_OPOPERANDS_H_

#include <cstddef>
#include <cstdint>

// The inputs of the opcodes whose operands several files read, named in an
// instruction's order (kvx.fbs Instruction.inputs): the lowering emits them
// (codegen/lowering), the loader checks their count (runtime/exec/OpTable),
// the CPU kernels (runtime/cpu/CpuKernelTable.cpp) and the CUDA emitters
// (codegen/cuda) read them, all by these names. The order is the
// executable's: reordering an enum changes what a .kvx means, like
// renumbering a kvx.fbs enum. A lowering lists its op's operands in a table
// checked with CoversEnumInOrder (EnumTable.h), so that an operand added here
// without its value there fails to compile.
namespace kvjit::kvx {

// KvWrite: key, value [T, kv_heads, head_dim], slot_mapping → the cache's
// layer.
enum class KvWriteOperand : uint8_t { Key, Value, SlotMapping, MAX = SlotMapping };

// KvAttention: query [T, heads, head_dim] and the step inputs that place
// each token in its sequence's cache → out.
enum class KvAttentionOperand : uint8_t {
  Query,
  Positions,
  SeqStarts,
  ContextLens,
  BlockTables,
  MAX = BlockTables,
};

template <typename Operand>
constexpr int OperandIndex(Operand operand) {
  return static_cast<int>(operand);
}

template <typename Operand>
inline constexpr size_t kOperandCount = static_cast<size_t>(Operand::MAX) + 1;

}  // namespace kvjit::kvx

#endif  // KVJIT_RUNTIME_SCHEMA_OPOPERANDS_H_
