// plan-memory: the activation arena and the paged KV layout of each function.
// The planning rule and the attributes it writes are described in Passes.td;
// MemoryPlanChecker.h holds the contract both sides of the plan rely on.

#include <algorithm>
#include <limits>
#include <numeric>
#include <optional>
#include <vector>

#include "ir/Kernel/KernelDialect.h"
#include "ir/Kv/KvDialect.h"
#include "ir/Kv/KvTypes.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/CheckedArithmetic.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MathExtras.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "passes/MemoryPlanChecker.h"
#include "passes/Passes.h"
#include "runtime/schema/KvCacheFormat.h"

namespace kvjit {
#define GEN_PASS_DEF_PLANMEMORY
#include "passes/Passes.h.inc"

namespace {

constexpr int64_t kBytesPerMib = int64_t{1} << 20;

// An activation to place: its live range as op positions in the body (both
// ends included) and its size rounded up to the alignment.
struct Activation {
  mlir::OpResult value;
  int64_t slot_bytes;
  int64_t defined_at;
  int64_t last_used_at;
  int64_t offset = kNotInArena;

  bool LiveTogetherWith(const Activation& other) const {
    return defined_at <= other.last_used_at && other.defined_at <= last_used_at;
  }
};

struct ArenaPlan {
  std::vector<Activation> activations;
  int64_t arena_bytes = 0;
  int64_t naive_bytes = 0;
};

// The paged KV pool's layout, row-major [block][layer][K, V][slot][kv_head][head_dim].
struct KvLayout {
  int64_t block_size;
  int64_t key_slot_stride_bytes;
  int64_t value_slot_stride_bytes;
  int64_t value_offset_bytes;
  int64_t layer_stride_bytes;
  int64_t block_bytes;
  int64_t blocks;
  kv::CacheElement key_type;
  kv::CacheElement value_type;
};

// Every activation of `body` with its live range. Walking the ops forward,
// the last op to mention a value, directly or inside its regions, is where
// the value dies.
mlir::FailureOr<std::vector<Activation>> CollectActivations(mlir::Block& body, int64_t max_tokens,
                                                            int64_t alignment) {
  llvm::DenseMap<mlir::Value, int64_t> last_used_at;
  for (auto [position, op] : llvm::enumerate(body)) {
    op.walk([&, position = position](mlir::Operation* nested) {
      for (mlir::Value operand : nested->getOperands()) {
        last_used_at[operand] = position;
        last_used_at[ViewedValue(operand)] = position;
      }
    });
  }
  std::vector<Activation> activations;
  for (auto [position, op] : llvm::enumerate(body)) {
    for (mlir::OpResult result : op.getResults()) {
      if (!NeedsArenaSpace(result)) continue;
      std::optional<int64_t> bytes = BoundedTensorBytes(result.getType(), max_tokens);
      std::optional<int64_t> slot_bytes =
          bytes ? llvm::checkedMul(*bytes / alignment + (*bytes % alignment != 0), alignment)
                : std::nullopt;
      if (!slot_bytes) {
        return op.emitError() << "result #" << result.getResultNumber() << " of type "
                              << result.getType() << " has no byte size the arena can hold with "
                              << max_tokens << " tokens per step";
      }
      const int64_t defined_at = position;
      auto last_use = last_used_at.find(result);
      activations.push_back({result, *slot_bytes, defined_at,
                             last_use == last_used_at.end() ? defined_at : last_use->second});
    }
  }
  return activations;
}

// Greedy by size: the largest activations go first, each into the tightest
// gap left between the already placed activations it is live together with,
// or past all of them. Returns the arena's size.
mlir::FailureOr<int64_t> PlaceBySize(std::vector<Activation>& activations,
                                     mlir::func::FuncOp func) {
  std::vector<size_t> placement_order(activations.size());
  std::iota(placement_order.begin(), placement_order.end(), 0);
  std::stable_sort(placement_order.begin(), placement_order.end(), [&](size_t a, size_t b) {
    return activations[a].slot_bytes > activations[b].slot_bytes;
  });

  int64_t arena_bytes = 0;
  std::vector<const Activation*> placed;
  std::vector<const Activation*> neighbours;
  for (size_t index : placement_order) {
    Activation& activation = activations[index];
    neighbours.clear();
    for (const Activation* other : placed) {
      if (other->LiveTogetherWith(activation)) neighbours.push_back(other);
    }
    std::sort(neighbours.begin(), neighbours.end(),
              [](const Activation* a, const Activation* b) { return a->offset < b->offset; });
    std::optional<int64_t> tightest_offset;
    int64_t tightest_gap = std::numeric_limits<int64_t>::max();
    int64_t free_from = 0;
    for (const Activation* neighbour : neighbours) {
      const int64_t gap = neighbour->offset - free_from;
      if (gap >= activation.slot_bytes && gap < tightest_gap) {
        tightest_gap = gap;
        tightest_offset = free_from;
      }
      free_from = std::max(free_from, neighbour->offset + neighbour->slot_bytes);
    }
    activation.offset = tightest_offset.value_or(free_from);
    std::optional<int64_t> end = llvm::checkedAdd(activation.offset, activation.slot_bytes);
    if (!end) {
      return func.emitError() << "function @" << func.getSymName()
                              << " needs an activation arena beyond 2^63 bytes";
    }
    arena_bytes = std::max(arena_bytes, *end);
    placed.push_back(&activation);
  }
  return arena_bytes;
}

mlir::FailureOr<ArenaPlan> PlanArena(mlir::func::FuncOp func, int64_t max_tokens,
                                     int64_t alignment) {
  if (!func.getBody().hasOneBlock()) {
    return func.emitError() << "function @" << func.getSymName()
                            << " has more than one block; plan-memory plans straight-line bodies";
  }
  ArenaPlan plan;
  mlir::FailureOr<std::vector<Activation>> activations =
      CollectActivations(func.front(), max_tokens, alignment);
  if (mlir::failed(activations)) return mlir::failure();
  plan.activations = std::move(*activations);
  mlir::FailureOr<int64_t> arena_bytes = PlaceBySize(plan.activations, func);
  if (mlir::failed(arena_bytes)) return mlir::failure();
  plan.arena_bytes = *arena_bytes;
  for (const Activation& activation : plan.activations) {
    std::optional<int64_t> naive_bytes = llvm::checkedAdd(plan.naive_bytes, activation.slot_bytes);
    if (!naive_bytes) {
      return func.emitError() << "function @" << func.getSymName()
                              << "'s activations add up to more than 2^63 bytes";
    }
    plan.naive_bytes = *naive_bytes;
  }
  return plan;
}

void RecordArenaPlan(mlir::func::FuncOp func, const ArenaPlan& plan, int64_t max_tokens,
                     int64_t alignment) {
  llvm::DenseMap<mlir::Value, int64_t> offsets;
  for (const Activation& activation : plan.activations) {
    offsets[activation.value] = activation.offset;
  }
  mlir::Builder builder(func.getContext());
  for (mlir::Operation& op : func.front()) {
    if (op.getNumResults() == 0) continue;
    llvm::SmallVector<int64_t> result_offsets;
    for (mlir::Value result : op.getResults()) {
      auto placed = offsets.find(result);
      result_offsets.push_back(placed == offsets.end() ? kNotInArena : placed->second);
    }
    op.setAttr(kArenaOffsetsAttrName, builder.getDenseI64ArrayAttr(result_offsets));
  }
  func->setAttr(kArenaAttrName, kernel::ArenaAttr::get(func.getContext(), plan.arena_bytes,
                                                       plan.naive_bytes, max_tokens, alignment));
}

// The layout of the function's KV pool, nullopt where it takes no cache.
mlir::FailureOr<std::optional<KvLayout>> PlanKvLayout(mlir::func::FuncOp func,
                                                      int64_t kv_memory_bytes,
                                                      int64_t kv_memory_mib) {
  llvm::SmallVector<kv::CacheType> caches;
  for (mlir::Type input : func.getArgumentTypes()) {
    if (auto cache = mlir::dyn_cast<kv::CacheType>(input)) caches.push_back(cache);
  }
  if (caches.empty()) return std::optional<KvLayout>();
  if (caches.size() > 1) {
    return func.emitError() << "function @" << func.getSymName() << " takes " << caches.size()
                            << " KV caches; a step function reads one pool";
  }
  kv::CacheType cache = caches.front();
  auto slot_bytes = [&](kv::CacheElement element) -> std::optional<int64_t> {
    std::optional<uint64_t> bytes =
        kvx::KvSlotBytes(kv::CacheFormat(element), static_cast<uint64_t>(cache.getKvHeads()),
                         static_cast<uint64_t>(cache.getHeadDim()));
    if (!bytes || *bytes > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return std::nullopt;
    }
    return static_cast<int64_t>(*bytes);
  };
  // The cache type's verifier holds head_dim to whole blocks, so only an
  // overflow leaves a size unknown.
  std::optional<int64_t> key_slot = slot_bytes(cache.getKeyType());
  std::optional<int64_t> value_slot = slot_bytes(cache.getValueType());
  std::optional<int64_t> value_offset =
      key_slot ? llvm::checkedMul(*key_slot, cache.getBlockSize()) : std::nullopt;
  std::optional<int64_t> values =
      value_slot ? llvm::checkedMul(*value_slot, cache.getBlockSize()) : std::nullopt;
  std::optional<int64_t> layer_stride =
      value_offset && values ? llvm::checkedAdd(*value_offset, *values) : std::nullopt;
  std::optional<int64_t> block_bytes =
      layer_stride ? llvm::checkedMul(*layer_stride, cache.getLayers()) : std::nullopt;
  if (!block_bytes) {
    return func.emitError() << "function @" << func.getSymName() << ": a block of " << cache
                            << " exceeds 2^63 bytes";
  }
  const int64_t blocks = kv_memory_bytes / *block_bytes;
  if (blocks == 0) {
    return func.emitError() << "function @" << func.getSymName() << ": the KV budget of "
                            << kv_memory_mib << " MiB (" << kv_memory_bytes
                            << " bytes) does not hold one cache block of " << *block_bytes
                            << " bytes (" << cache.getLayers() << " layers x "
                            << cache.getBlockSize() << " block_size x (" << *key_slot
                            << " bytes of " << kv::stringifyCacheElement(cache.getKeyType())
                            << " keys + " << *value_slot << " bytes of "
                            << kv::stringifyCacheElement(cache.getValueType())
                            << " values per slot)); raise kv-memory-mib";
  }
  return std::optional<KvLayout>(KvLayout{cache.getBlockSize(), *key_slot, *value_slot,
                                          *value_offset, *layer_stride, *block_bytes, blocks,
                                          cache.getKeyType(), cache.getValueType()});
}

void RecordKvLayout(mlir::func::FuncOp func, const KvLayout& layout) {
  func->setAttr(kKvLayoutAttrName,
                kv::LayoutAttr::get(func.getContext(), layout.block_size, layout.key_type,
                                    layout.value_type, layout.block_bytes, layout.blocks,
                                    layout.layer_stride_bytes, layout.value_offset_bytes,
                                    layout.key_slot_stride_bytes, layout.value_slot_stride_bytes));
}

void EmitReport(mlir::func::FuncOp func, const ArenaPlan& plan,
                const std::optional<KvLayout>& kv_layout, int64_t max_tokens,
                int64_t kv_memory_mib) {
  const double reuse = plan.arena_bytes == 0
                           ? 1.0
                           : static_cast<double>(plan.naive_bytes) / plan.arena_bytes;
  mlir::InFlightDiagnostic remark = func.emitRemark();
  remark << "memory plan of @" << func.getSymName() << "\n  activations: "
         << plan.activations.size() << " values in an arena of " << plan.arena_bytes
         << " bytes, naive sum " << plan.naive_bytes << " bytes, reuse "
         << llvm::formatv("{0:F2}", reuse).str() << "x, for " << max_tokens
         << " tokens per step";
  if (kv_layout) {
    remark << "\n  kv cache: " << kv::stringifyCacheElement(kv_layout->key_type) << " keys, "
           << kv::stringifyCacheElement(kv_layout->value_type) << " values, "
           << kv_layout->block_bytes << " bytes per block of " << kv_layout->block_size
           << " tokens, " << kv_layout->blocks << " blocks ("
           << kv_layout->blocks * kv_layout->block_size << " tokens) in " << kv_memory_mib
           << " MiB";
  } else {
    remark << "\n  kv cache: none";
  }
}

struct PlanMemoryPass : impl::PlanMemoryBase<PlanMemoryPass> {
  using PlanMemoryBase::PlanMemoryBase;

  void runOnOperation() override {
    mlir::ModuleOp module = getOperation();
    const int64_t max_tokens = maxTokensPerStep;
    const int64_t alignment_bytes = alignment;
    const int64_t kv_memory_mib = kvMemoryMib;
    if (max_tokens <= 0) {
      module.emitError() << "plan-memory: max-tokens-per-step must be positive, got " << max_tokens;
      return signalPassFailure();
    }
    if (alignment_bytes <= 0 || !llvm::isPowerOf2_64(alignment_bytes)) {
      module.emitError() << "plan-memory: alignment must be a power of two, got "
                         << alignment_bytes;
      return signalPassFailure();
    }
    std::optional<int64_t> kv_memory_bytes = llvm::checkedMul(kv_memory_mib, kBytesPerMib);
    if (kv_memory_mib < 0 || !kv_memory_bytes) {
      module.emitError() << "plan-memory: kv-memory-mib must be between 0 and 2^43, got "
                         << kv_memory_mib;
      return signalPassFailure();
    }
    for (mlir::func::FuncOp func : module.getOps<mlir::func::FuncOp>()) {
      if (func.isDeclaration()) continue;
      mlir::FailureOr<ArenaPlan> plan = PlanArena(func, max_tokens, alignment_bytes);
      mlir::FailureOr<std::optional<KvLayout>> kv_layout =
          PlanKvLayout(func, *kv_memory_bytes, kv_memory_mib);
      if (mlir::failed(plan) || mlir::failed(kv_layout)) {
        signalPassFailure();
        continue;
      }
      RecordArenaPlan(func, *plan, max_tokens, alignment_bytes);
      if (*kv_layout) RecordKvLayout(func, **kv_layout);
      if (report) EmitReport(func, *plan, *kv_layout, max_tokens, kv_memory_mib);
    }
  }
};

}  // namespace
}  // namespace kvjit
