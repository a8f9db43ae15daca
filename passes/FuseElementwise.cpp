// fuse-elementwise: groups the ops between the GEMMs into kernel.fusion
// regions. The rule is written out in Passes.td.

#include "ir/Kernel/KernelOps.h"
#include "ir/Tfm/TfmOps.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "passes/Passes.h"

namespace kvjit {
#define GEN_PASS_DEF_FUSEELEMENTWISE
#include "passes/Passes.h.inc"

namespace {

using kernel::FusionKind;

// Ops of one block that become one kernel, in block order.
struct FusionGroup {
  FusionKind kind;
  llvm::SmallVector<mlir::Operation*> ops;
};

// Decides the fusions of one block and builds them.
class BlockFuser {
 public:
  explicit BlockFuser(mlir::Block& block) : block_(block) {}

  void Run() {
    ClaimTemplates();
    ClaimElementwiseTrees();
    for (FusionGroup& group : groups_) Build(group);
  }

 private:
  // Rules 1 and 2 of the pass description, in one sweep: their ops do not
  // overlap except a residual add, which the first row-wise op in block
  // order that reads it takes.
  void ClaimTemplates() {
    for (mlir::Operation& op : block_) {
      if (op.hasTrait<tfm::OpTrait::RowWise>()) {
        if (mlir::Operation* add = ExclusiveResidualAdd(op)) {
          Claim({FusionKind::row_wise, {add, &op}});
        } else {
          Claim({FusionKind::row_wise, {&op}});
        }
      } else if (auto mul = mlir::dyn_cast<tfm::MulOp>(op)) {
        if (tfm::SiluOp gate = ExclusiveSiluOperand(mul)) Claim({FusionKind::swiglu, {gate, mul}});
      }
    }
  }

  // The unclaimed tfm.add of this block that computes `op`'s operand 0, if
  // `op` fuses a residual add. The fusion takes `op`'s place, after its other
  // operands (a norm's weight), so the sum's other readers must come after
  // `op`.
  mlir::Operation* ExclusiveResidualAdd(mlir::Operation& op) {
    if (!op.hasTrait<tfm::OpTrait::FusesResidualAdd>()) return nullptr;
    auto add = op.getOperand(0).getDefiningOp<tfm::AddOp>();
    if (!add || add->getBlock() != &block_ || claimed_.contains(add)) return nullptr;
    for (mlir::Operation* user : add->getUsers()) {
      if (user != &op && !op.isBeforeInBlock(block_.findAncestorOpInBlock(*user))) return nullptr;
    }
    return add;
  }

  // The silu of this block that `mul` alone reads, if any: silu(gate) · up.
  tfm::SiluOp ExclusiveSiluOperand(tfm::MulOp mul) {
    for (mlir::Value operand : {mul.getLhs(), mul.getRhs()}) {
      auto silu = operand.getDefiningOp<tfm::SiluOp>();
      if (silu && silu->getBlock() == &block_ && operand.hasOneUse()) return silu;
    }
    return tfm::SiluOp();
  }

  // Rule 3: every unclaimed elementwise op roots a tree that absorbs the
  // trees of the operands it alone reads.
  void ClaimElementwiseTrees() {
    llvm::MapVector<mlir::Operation*, llvm::SmallVector<mlir::Operation*>> tree_of_root;
    for (mlir::Operation& op : block_) {
      if (claimed_.contains(&op) || !op.hasTrait<tfm::OpTrait::Elementwise>()) continue;
      llvm::SmallVector<mlir::Operation*> tree;
      for (mlir::Value operand : op.getOperands()) {
        auto found = tree_of_root.find(operand.getDefiningOp());
        if (found == tree_of_root.end() || !operand.hasOneUse()) continue;
        tree.append(found->second);
        found->second.clear();
      }
      tree.push_back(&op);
      tree_of_root[&op] = std::move(tree);
    }
    for (auto& [root, tree] : tree_of_root) {
      if (tree.empty()) continue;
      llvm::sort(tree,
                 [](mlir::Operation* a, mlir::Operation* b) { return a->isBeforeInBlock(b); });
      Claim({FusionKind::elementwise, std::move(tree)});
    }
  }

  void Claim(FusionGroup group) {
    claimed_.insert(group.ops.begin(), group.ops.end());
    groups_.push_back(std::move(group));
  }

  // A row-wise op's residual add also yields the sum, which the next
  // residual add reads. In every other group each value but the last has one
  // reader, in the group.
  static llvm::SmallVector<mlir::Value> YieldedValues(const FusionGroup& group) {
    if (group.kind == FusionKind::row_wise && group.ops.size() == 2) {
      return {group.ops[0]->getResult(0), group.ops[1]->getResult(0)};
    }
    return {group.ops.back()->getResult(0)};
  }

  void Build(const FusionGroup& group) {
    llvm::SmallPtrSet<mlir::Operation*, 4> members(group.ops.begin(), group.ops.end());
    llvm::SetVector<mlir::Value> inputs;
    llvm::SmallVector<mlir::Location> locations;
    for (mlir::Operation* op : group.ops) {
      locations.push_back(op->getLoc());
      for (mlir::Value operand : op->getOperands()) {
        if (!members.contains(operand.getDefiningOp())) inputs.insert(operand);
      }
    }
    llvm::SmallVector<mlir::Value> yielded = YieldedValues(group);

    mlir::OpBuilder builder(group.ops.back());
    mlir::Location location = builder.getFusedLoc(locations);
    auto fusion = builder.create<kernel::FusionOp>(location, mlir::ValueRange(yielded).getTypes(),
                                                   inputs.getArrayRef(), group.kind);
    mlir::Block& body = fusion.getBody().emplaceBlock();
    mlir::IRMapping mapping;
    for (mlir::Value input : inputs) {
      mapping.map(input, body.addArgument(input.getType(), input.getLoc()));
    }
    builder.setInsertionPointToStart(&body);
    for (mlir::Operation* op : group.ops) builder.clone(*op, mapping);
    llvm::SmallVector<mlir::Value> body_results;
    for (mlir::Value value : yielded) body_results.push_back(mapping.lookup(value));
    builder.create<kernel::YieldOp>(location, body_results);

    for (auto [original, result] : llvm::zip(yielded, fusion.getResults())) {
      original.replaceAllUsesWith(result);
    }
    for (mlir::Operation* op : llvm::reverse(group.ops)) op->erase();
  }

  mlir::Block& block_;
  llvm::DenseSet<mlir::Operation*> claimed_;
  llvm::SmallVector<FusionGroup> groups_;
};

struct FuseElementwisePass : impl::FuseElementwiseBase<FuseElementwisePass> {
  using FuseElementwiseBase::FuseElementwiseBase;

  void runOnOperation() override {
    // Collected first: building fusions adds blocks that must not be visited.
    llvm::SmallVector<mlir::Block*> blocks;
    getOperation()->walk([&](mlir::Block* block) {
      if (!mlir::isa<kernel::FusionOp>(block->getParentOp())) blocks.push_back(block);
    });
    for (mlir::Block* block : blocks) BlockFuser(*block).Run();
  }
};

}  // namespace
}  // namespace kvjit
