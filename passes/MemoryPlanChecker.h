#ifndef KVJIT_PASSES_MEMORYPLANCHECKER_H_
#define KVJIT_PASSES_MEMORYPLANCHECKER_H_

#include <cstdint>
#include <optional>

#include "ir/Kernel/KernelDialect.h"
#include "ir/Kv/KvDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Types.h"
#include "mlir/IR/Value.h"
#include "mlir/Support/LogicalResult.h"

// The memory plan's contract between plan-memory, codegen and the executable
// writer: the attributes the pass leaves (typed in ODS beside the kernel and
// kv dialects, KernelAttrs.td and KvAttrs.td; their meaning is in Passes.td),
// which values take arena space and how many bytes each takes, and a checker
// that proves a plan sound without trusting the pass that made it.
namespace kvjit {

// The attributes' names, as their dialects' ODS declares them.
inline constexpr llvm::StringLiteral kArenaAttrName =
    kernel::KernelDialect::ArenaAttrHelper::getNameStr();
inline constexpr llvm::StringLiteral kArenaOffsetsAttrName =
    kernel::KernelDialect::ArenaOffsetsAttrHelper::getNameStr();
inline constexpr llvm::StringLiteral kKvLayoutAttrName =
    kv::KvDialect::LayoutAttrHelper::getNameStr();

// The function's activation arena (`kernel.arena`); null before plan-memory.
kernel::ArenaAttr ArenaOf(mlir::func::FuncOp func);
// The byte offset of each of `op`'s results (`kernel.arena_offsets`).
mlir::DenseI64ArrayAttr ArenaOffsetsOf(mlir::Operation* op);
// The function's KV pool layout (`kv.layout`); null without a cache.
kv::LayoutAttr KvLayoutOf(mlir::func::FuncOp func);

// The `kernel.arena_offsets` entry of a result that has no place in the arena.
inline constexpr int64_t kNotInArena = -1;

// Whether `value`, a result of an op in a function body, is an activation
// the arena holds: a tensor that is neither a weight (`tfm.weight`) nor a
// constant, which are model data, not per-step values.
// A column view (`tfm.slice_columns`) is not: codegen reads it in place.
bool NeedsArenaSpace(mlir::Value value);

// The value whose bytes `value` reads: the viewed value of a column view
// (through views of views), else `value` itself. A use of a view keeps the
// bytes it views alive.
mlir::Value ViewedValue(mlir::Value value);

// The bytes a value of `type` takes with every dynamic dimension bounded by
// `max_tokens`, before alignment; nullopt where `type` is not a ranked tensor
// of integers or floats, or its size does not fit in int64_t.
std::optional<int64_t> BoundedTensorBytes(mlir::Type type, int64_t max_tokens);

// Proves the plan plan-memory left on `func` sound, recomputing from the IR
// alone which values need space, their sizes and their live ranges: every
// activation has an aligned offset, fits inside the arena's bytes, and
// shares no byte with another activation live at the same time. On failure
// emits an error at the op at fault, naming the values and byte ranges.
// A declaration has nothing to check.
mlir::LogicalResult VerifyMemoryPlan(mlir::func::FuncOp func);

}  // namespace kvjit

#endif  // KVJIT_PASSES_MEMORYPLANCHECKER_H_
