// keep-first-layers: a model cut after its first decoder layers, so that its
// last kept layer feeds the final norm and output projection (speculative
// decoding's layer-skipping self-draft). The contract is in Passes.td.

#include <algorithm>
#include <cstdint>
#include <limits>

#include "ir/Kv/KvTypes.h"
#include "ir/Tfm/TfmOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "passes/Passes.h"

namespace kvjit {
#define GEN_PASS_DEF_KEEPFIRSTLAYERS
#include "passes/Passes.h.inc"

namespace {

// Depends on no layer's weights.
constexpr int64_t kNoLayer = -1;
// Leads to no layer's weights.
constexpr int64_t kNoLaterLayer = std::numeric_limits<int64_t>::max();

// The layer of a param named "blk.<i>.…", kNoLayer for any other name.
int64_t LayerOfParam(llvm::StringRef name) {
  int64_t layer = 0;
  if (!name.consume_front("blk.") || name.consumeInteger(10, layer) || !name.starts_with(".")) {
    return kNoLayer;
  }
  return layer;
}

// Where an op of a function body stands among the layers.
struct LayerSpan {
  // The last layer whose weights the op depends on.
  int64_t depends_on = kNoLayer;
  // The first layer whose weights its result leads to (an op that reads a
  // layer's weight leads to that layer).
  int64_t leads_to = kNoLaterLayer;
};

class LayerMap {
 public:
  explicit LayerMap(mlir::Block& body) {
    for (mlir::Operation& op : body) {
      LayerSpan& span = spans_[&op];
      if (auto weight = mlir::dyn_cast<tfm::WeightOp>(op)) span.depends_on = LayerOfParam(weight.getParam());
      for (mlir::Value operand : op.getOperands()) {
        const LayerSpan operand_span = SpanOf(operand);
        span.depends_on = std::max(span.depends_on, operand_span.depends_on);
        if (auto weight = operand.getDefiningOp<tfm::WeightOp>()) {
          const int64_t layer = LayerOfParam(weight.getParam());
          if (layer != kNoLayer) span.leads_to = std::min(span.leads_to, layer);
        }
      }
      count_ = std::max(count_, span.depends_on + 1);
    }
    for (mlir::Operation& op : llvm::reverse(body)) {
      LayerSpan& span = spans_[&op];
      for (mlir::Operation* user : op.getUsers()) {
        span.leads_to = std::min(span.leads_to, SpanOf(user).leads_to);
      }
    }
  }

  int64_t count() const { return count_; }

  // The ops that could be `layer`'s output: each depends on the layer's
  // weights and no longer leads to them, while an operand of it lies within
  // the layer (depends on it and leads to it).
  llvm::SmallVector<mlir::Operation*> OutputsOf(int64_t layer, mlir::Block& body) const {
    llvm::SmallVector<mlir::Operation*> outputs;
    for (mlir::Operation& op : body) {
      const LayerSpan span = SpanOf(&op);
      if (span.depends_on != layer || span.leads_to <= layer || op.getNumResults() != 1) continue;
      const bool reads_the_layer = llvm::any_of(op.getOperands(), [&](mlir::Value operand) {
        const LayerSpan operand_span = SpanOf(operand);
        return operand_span.depends_on == layer && operand_span.leads_to == layer;
      });
      if (reads_the_layer) outputs.push_back(&op);
    }
    return outputs;
  }

 private:
  LayerSpan SpanOf(mlir::Operation* op) const {
    auto known = spans_.find(op);
    return known == spans_.end() ? LayerSpan() : known->second;
  }
  LayerSpan SpanOf(mlir::Value value) const {
    mlir::Operation* definer = value.getDefiningOp();
    return definer == nullptr ? LayerSpan() : SpanOf(definer);
  }

  llvm::DenseMap<mlir::Operation*, LayerSpan> spans_;
  int64_t count_ = 0;
};

class KeepFirstLayersPass : public impl::KeepFirstLayersBase<KeepFirstLayersPass> {
 public:
  using KeepFirstLayersBase::KeepFirstLayersBase;

  void runOnOperation() override {
    mlir::ModuleOp module = getOperation();
    bool changed = false;
    for (auto function : module.getOps<mlir::func::FuncOp>()) {
      if (function.isExternal()) continue;
      mlir::FailureOr<bool> cut = Cut(function);
      if (mlir::failed(cut)) return signalPassFailure();
      changed |= *cut;
    }
    if (!changed) return markAllAnalysesPreserved();
    EraseUnreadParams(module);
  }

 private:
  // Whether `function` lost layers.
  mlir::FailureOr<bool> Cut(mlir::func::FuncOp function) {
    const std::string name = ("@" + function.getSymName()).str();
    if (llvm::any_of(function.getArgumentTypes(),
                     [](mlir::Type type) { return mlir::isa<kv::CacheType>(type); })) {
      function.emitError() << "keep-first-layers runs before insert-kv-cache: " << name
                           << " reads a KV cache already, which holds every layer";
      return mlir::failure();
    }
    mlir::Block& body = function.getBody().front();
    const LayerMap map(body);
    if (map.count() == 0) {
      function.emitError() << "keep-first-layers finds no layers in " << name
                           << ": no tfm.weight reads a param named blk.<i>.…";
      return mlir::failure();
    }
    if (layers < 1 || layers > map.count()) {
      function.emitError() << "keep-first-layers{layers=" << layers.getValue() << "} keeps "
                           << (layers < 1 ? "no layer of " : "more layers than ") << name << "'s "
                           << map.count();
      return mlir::failure();
    }
    if (layers == map.count()) return false;
    mlir::FailureOr<mlir::Value> kept = OutputOf(function, map, layers - 1);
    if (mlir::failed(kept)) return mlir::failure();
    mlir::FailureOr<mlir::Value> last = OutputOf(function, map, map.count() - 1);
    if (mlir::failed(last)) return mlir::failure();
    last->replaceAllUsesWith(*kept);
    for (mlir::Operation& op : llvm::make_early_inc_range(llvm::reverse(body))) {
      if (mlir::isOpTriviallyDead(&op)) op.erase();
    }
    return true;
  }

  mlir::FailureOr<mlir::Value> OutputOf(mlir::func::FuncOp function, const LayerMap& map,
                                        int64_t layer) {
    mlir::Block& body = function.getBody().front();
    llvm::SmallVector<mlir::Operation*> outputs = map.OutputsOf(layer, body);
    if (outputs.size() == 1) return outputs.front()->getResult(0);
    function.emitError() << "keep-first-layers cannot cut @" << function.getSymName()
                         << " after layer " << layer << ": it finds " << outputs.size()
                         << " values where the layer's output should be one (the residual sum "
                            "that the next layer or the final norm reads)";
    return mlir::failure();
  }

  // The params of the layers cut away, now read by nothing. A concatenation
  // follows its parts in the module, so going backwards it goes first and
  // its parts are unread by the time they are reached.
  void EraseUnreadParams(mlir::ModuleOp module) {
    llvm::SmallVector<tfm::ParamOp> params(module.getOps<tfm::ParamOp>());
    for (tfm::ParamOp param : llvm::reverse(params)) {
      if (LayerOfParam(param.getSymName()) >= layers &&
          mlir::SymbolTable::symbolKnownUseEmpty(param, module)) {
        param->erase();
      }
    }
  }
};

}  // namespace
}  // namespace kvjit
