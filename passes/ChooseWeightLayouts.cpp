// choose-weight-layouts: the layout each weight's CPU kernels read, per
// target ISA. The contract is in Passes.td.

#include <iterator>
#include <optional>

#include "ir/Tfm/TfmOps.h"
#include "ir/Tfm/TfmStorage.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringRef.h"
#include "mlir/IR/SymbolTable.h"
#include "passes/Passes.h"
#include "runtime/quant/StorageType.h"

namespace kvjit {
#define GEN_PASS_DEF_CHOOSEWEIGHTLAYOUTS
#include "passes/Passes.h.inc"

namespace {

// Rows per group of rows_interleaved8.
constexpr int64_t kInterleavedRows = 8;

// The storage types whose rows_interleaved8 layout measured faster than
// GGUF's rows on an ISA and microarchitecture, over a whole step. On Intel's
// AVX-512 cores (generic) none: on SmolLM2 Q4_1 at 2 threads
// (docs/benchmarks.md, *Weight layouts chosen by the compiler*) the batch-1
// decode GEMV ran 5-6% slower interleaved on AVX-512 VNNI and AVX2 alike, and
// the AVX-512 VNNI GEMM of prefill, which the same weights serve, gained 7%
// under load and nothing on a quieter machine. On AMD Zen 4 the decode GEMV
// over SmolLM2's Q4_1 linears ran 8-30% faster interleaved and the GEMM
// level (docs/benchmarks.md, *Interleaved Q4_1 rows on Zen 4*); Q8_0 there
// (SmolLM2's tied output projection, and a Q8_0 SmolLM2's every linear)
// decoded 30-45% faster per projection, prefill and batched decode level
// (*Interleaved Q8_0 rows and the tied output projection on Zen 4*); Q4_0,
// Q5_0 and Q5_1 were not measured there. On AMD Zen 5, once the GEMV
// prefetched the rows that come next, Q8_0's and Q4_0's decode GEMV read a
// 285 MB matrix at 47 and 39 GB/s interleaved against 39 and 33 in GGUF's
// rows (2 threads), and whole decode steps gained on Llama-3.2-1B's shape in
// Q8_0 and Q4_0 and on SmolLM2's Q4_1 (*Decode GEMV prefetch and Zen 5's
// layouts*). An entry here makes the default pipeline choose the layout.
//
// Zen 4 again, once GGUF's rows had the prefetching GEMV and the fast
// numerics their own kernels (*Issue 28, seventh slice*): the Llama-3.2-1B
// shape in Q8_0 (rows of 2048 and 8192 columns) decoded 25-45% faster in
// GGUF's rows under both numerics, prefill level, while SmolLM2's tied Q8_0
// output projection (576 columns) decoded 9% faster interleaved under the
// default numerics (5% slower under the fast one). So on Zen 4 Q8_0 is
// interleaved only in rows of at most 1024 columns.
struct InterleavedType {
  tfm::StorageType storage;
  // The longest rows the layout measured faster for; 0: rows of any length.
  int64_t max_cols = 0;
};

struct MeasuredFaster {
  llvm::StringLiteral isa;
  llvm::StringLiteral cpu;
  llvm::ArrayRef<InterleavedType> types;
};

constexpr InterleavedType kZen4Interleaved[] = {{tfm::StorageType::q4_1}, {tfm::StorageType::q8_0, 1024}};
constexpr InterleavedType kZen5Interleaved[] = {
    {tfm::StorageType::q4_0}, {tfm::StorageType::q4_1}, {tfm::StorageType::q8_0}};

// Whether `measured` lists `param`'s storage type for rows of its length.
bool MeasuredFasterFor(const MeasuredFaster& measured, tfm::ParamOp param) {
  const int64_t cols = mlir::cast<mlir::RankedTensorType>(param.getType()).getDimSize(1);
  return llvm::any_of(measured.types, [&](const InterleavedType& type) {
    return type.storage == param.getStorage() && (type.max_cols == 0 || cols <= type.max_cols);
  });
}

const MeasuredFaster kMeasuredFaster[] = {
    {"avx512vnni", "generic", {}},
    {"avx512vnni", "zen4", kZen4Interleaved},
    {"avx512vnni", "zen5", kZen5Interleaved},
    {"avx2", "generic", {}},
    {"avx2", "zen4", {}},
    {"avx2", "zen5", {}},
    {"portable", "generic", {}},
    {"portable", "zen4", {}},
    {"portable", "zen5", {}},
};

// The rule tfm.param's verifier holds rows_interleaved8 to: blocks of 32
// elements (q8_0, q4_0, q4_1, q5_0, q5_1).
bool HasInterleavableBlocks(tfm::StorageType storage) {
  return quant::ElementsPerBlock(tfm::ToQuantStorage(storage)) == 32;
}

// Whether `operand` is a read that the CPU kernels make in either layout: a
// linear's weight (every MatMul path) or an embedding's table (the lookup
// finds a row's blocks in its group), which a tied output projection shares.
bool ReadsEitherLayout(mlir::OpOperand& operand) {
  mlir::Operation* user = operand.getOwner();
  if (auto linear = mlir::dyn_cast<tfm::LinearOp>(user)) return &operand == &linear.getWeightMutable();
  if (auto embedding = mlir::dyn_cast<tfm::EmbeddingOp>(user)) return &operand == &embedding.getTableMutable();
  return false;
}

// Whether `param` is a matrix the interleaved kernels can read and only
// reads that know its layout read it.
bool Qualifies(tfm::ParamOp param, mlir::ModuleOp module) {
  if (param.getLayout() || param.getShifted() || !HasInterleavableBlocks(param.getStorage())) return false;
  auto type = mlir::cast<mlir::RankedTensorType>(param.getType());
  if (type.getRank() != 2 || type.getDimSize(0) % kInterleavedRows != 0) return false;
  std::optional<mlir::SymbolTable::UseRange> uses = mlir::SymbolTable::getSymbolUses(param, module);
  if (!uses) return false;
  return llvm::all_of(*uses, [](const mlir::SymbolTable::SymbolUse& use) {
    auto weight = mlir::dyn_cast<tfm::WeightOp>(use.getUser());
    if (!weight) return false;
    return llvm::all_of(weight.getResult().getUses(), ReadsEitherLayout);
  });
}

struct ChooseWeightLayoutsPass : impl::ChooseWeightLayoutsBase<ChooseWeightLayoutsPass> {
  using ChooseWeightLayoutsBase::ChooseWeightLayoutsBase;

  void runOnOperation() override {
    mlir::ModuleOp module = getOperation();
    if (!llvm::any_of(kMeasuredFaster, [&](const MeasuredFaster& entry) { return entry.isa == isa; })) {
      module.emitError() << "choose-weight-layouts: isa '" << isa
                         << "' is none of avx512vnni, avx2, portable";
      return signalPassFailure();
    }
    const MeasuredFaster* measured = llvm::find_if(
        kMeasuredFaster, [&](const MeasuredFaster& entry) { return entry.isa == isa && entry.cpu == cpu; });
    if (measured == std::end(kMeasuredFaster)) {
      module.emitError() << "choose-weight-layouts: cpu '" << cpu << "' is none of generic, zen4, zen5";
      return signalPassFailure();
    }
    if (policy != "measured" && policy != "every") {
      module.emitError() << "choose-weight-layouts: policy '" << policy
                         << "' is neither measured nor every";
      return signalPassFailure();
    }
    auto layout = tfm::WeightLayoutAttr::get(module.getContext(), tfm::WeightLayout::rows_interleaved8);
    for (tfm::ParamOp param : module.getOps<tfm::ParamOp>()) {
      if (!Qualifies(param, module)) continue;
      if (policy == "measured" && !MeasuredFasterFor(*measured, param)) continue;
      param.setLayoutAttr(layout);
    }
  }
};

}  // namespace
}  // namespace kvjit
