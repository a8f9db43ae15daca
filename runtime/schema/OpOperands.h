#ifndef KVJIT_RUNTIME_SCHEMA_OPOPERANDS_H_
#define KVJIT_RUNTIME_SCHEMA_OPOPERANDS_H_

#include <cstddef>
#include <cstdint>

#include "runtime/schema/kvx_generated.h"

// The inputs of every opcode of a fixed arity, named in an instruction's
// order (kvx.fbs Instruction.inputs): the lowering emits them
// (codegen/lowering), the loader checks their count and shapes and costs
// them (runtime/exec/OpTable.cpp, runtime/ops), the CPU kernels
// (runtime/cpu/CpuKernelTable.cpp, runtime/ops) and the CUDA emitters and
// checks (codegen/cuda, runtime/cuda/CudaModuleVerifier.cpp) read them, all
// by these names. Elementwise, whose inputs are its chain's operands, has
// none. The order is the executable's: reordering an enum changes what a
// .kvx means, like renumbering a kvx.fbs enum. A lowering lists its op's
// operands in a table checked with CoversEnumInOrder (EnumTable.h), so that
// an operand added here without its value there fails to compile.
namespace kvjit::kvx {

// Embedding: table (a weight [vocab, hidden]), tokens → out [T, hidden].
enum class EmbeddingOperand : uint8_t { Table, Tokens, MAX = Tokens };

// Linear: x [rows, in], weight [out, in] and, where the model has one, bias
// [out] → out [rows, out]. Bias, the last, is optional.
enum class LinearOperand : uint8_t { X, Weight, Bias, MAX = Bias };
static_assert(LinearOperand::Bias == LinearOperand::MAX, "the optional bias is the last operand");

// RmsNorm: x, weight → out.
enum class RmsNormOperand : uint8_t { X, Weight, MAX = Weight };

// AddRmsNorm: a, b (the residual add's operands), weight → out: a + b, and
// that sum normed.
enum class AddRmsNormOperand : uint8_t { A, B, Weight, MAX = Weight };

// SwiGlu: gate, up → out: silu(gate)·up.
enum class SwiGluOperand : uint8_t { Gate, Up, MAX = Up };

// Rope: x [T, heads, head_dim], positions → out.
enum class RopeOperand : uint8_t { X, Positions, MAX = Positions };

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

// GatherRows: x, rows (indices into x's rows) → out.
enum class GatherRowsOperand : uint8_t { X, Rows, MAX = Rows };

// Copy: x → out (a reshape: same bytes, other shape).
enum class CopyOperand : uint8_t { X, MAX = X };

// AllReduce: x → out, x summed over the tensor-parallel ranks.
enum class AllReduceOperand : uint8_t { X, MAX = X };

// AllGather: x (this rank's columns) → out (every rank's, in rank order).
enum class AllGatherOperand : uint8_t { X, MAX = X };

template <typename Operand>
constexpr int OperandIndex(Operand operand) {
  return static_cast<int>(operand);
}

// The inputs an instruction has with all its operands.
template <typename Operand>
inline constexpr size_t kOperandCount = static_cast<size_t>(Operand::MAX) + 1;

// The inputs an instruction has at least: all but its optional operands,
// which are the last.
template <typename Operand>
inline constexpr size_t kRequiredOperandCount = kOperandCount<Operand>;
template <>
inline constexpr size_t kRequiredOperandCount<LinearOperand> =
    static_cast<size_t>(LinearOperand::Bias);

// Whether `instruction` has `operand`: always for a required one.
template <typename Operand>
bool HasOperand(const Instruction& instruction, Operand operand) {
  return static_cast<size_t>(OperandIndex(operand)) < instruction.inputs()->size();
}

// The reference `instruction` reads as `operand`.
template <typename Operand>
const TensorRef& InputOf(const Instruction& instruction, Operand operand) {
  return *instruction.inputs()->Get(static_cast<flatbuffers::uoffset_t>(OperandIndex(operand)));
}

}  // namespace kvjit::kvx

#endif  // KVJIT_RUNTIME_SCHEMA_OPOPERANDS_H_
