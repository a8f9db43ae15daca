// shard-tensor-parallel: one rank's program of a model split over several
// processes, Megatron-LM's way. The contract is in Passes.td.

#include <cstdint>
#include <string>

#include "ir/Dist/DistDialect.h"
#include "ir/Dist/DistOps.h"
#include "ir/Kv/KvTypes.h"
#include "ir/Tfm/TfmOps.h"
#include "ir/Tfm/TfmStorage.h"
#include "ir/Tfm/TfmTraits.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"
#include "passes/Passes.h"
#include "runtime/quant/StorageType.h"

namespace kvjit {
#define GEN_PASS_DEF_SHARDTENSORPARALLEL
#include "passes/Passes.h.inc"

namespace {

// [begin, end) of heads, columns or rows.
struct Range {
  int64_t begin;
  int64_t end;
  int64_t size() const { return end - begin; }
  Range Times(int64_t factor) const { return {begin * factor, end * factor}; }
};

// The rank's share of `count` items split as evenly as whole `units` allow.
Range ShareOf(int64_t count, int64_t units, int64_t ranks, int64_t rank) {
  const int64_t whole = count / units;
  return Range{rank * whole / ranks * units, (rank + 1) * whole / ranks * units};
}

// The query and KV heads of one rank (Passes.td says how they are shared
// out).
struct HeadShare {
  Range query;
  Range kv;
};

mlir::FailureOr<HeadShare> ShareHeads(tfm::AttentionOp attention, int64_t heads,
                                      int64_t kv_heads, int64_t ranks, int64_t rank) {
  const int64_t group = heads / kv_heads;
  if (kv_heads >= ranks) {
    const Range kv = ShareOf(kv_heads, 1, ranks, rank);
    return HeadShare{kv.Times(group), kv};
  }
  const int64_t replicas = ranks / kv_heads;
  if (ranks % kv_heads != 0 || group < replicas) {
    return attention.emitOpError()
           << "has " << heads << " query heads in " << kv_heads << " KV heads, which " << ranks
           << " ranks cannot share: with fewer KV heads than ranks, the ranks must be a multiple "
              "of the KV heads and no more than the query heads";
  }
  const int64_t kv = rank / replicas;
  const Range in_group = ShareOf(group, 1, replicas, rank % replicas);
  return HeadShare{Range{kv * group + in_group.begin, kv * group + in_group.end},
                   Range{kv, kv + 1}};
}

void SetExtent(mlir::Value value, int64_t dim, int64_t extent) {
  auto type = mlir::cast<mlir::RankedTensorType>(value.getType());
  llvm::SmallVector<int64_t> shape(type.getShape());
  shape[dim] = extent;
  value.setType(mlir::RankedTensorType::get(shape, type.getElementType()));
}

class Sharder {
 public:
  Sharder(mlir::ModuleOp module, int64_t ranks, int64_t rank)
      : module_(module), ranks_(ranks), rank_(rank), builder_(module.getContext()) {}

  mlir::LogicalResult Shard(mlir::func::FuncOp function) {
    if (mlir::failed(ShardOutput(function))) return mlir::failure();
    llvm::SmallVector<tfm::AttentionOp> attentions(function.getOps<tfm::AttentionOp>());
    if (attentions.empty()) {
      return function.emitOpError()
             << "has no tfm.attention to share out by heads: run fuse-attention first";
    }
    for (tfm::AttentionOp attention : attentions) {
      if (mlir::failed(ShardAttention(attention))) return mlir::failure();
    }
    llvm::SmallVector<tfm::LinearOp> linears(function.getOps<tfm::LinearOp>());
    for (tfm::LinearOp linear : linears) {
      if (mlir::failed(ShardFeedForward(linear))) return mlir::failure();
    }
    if (mlir::failed(ShardFusedProjections())) return mlir::failure();
    for (auto weight : llvm::make_early_inc_range(function.getOps<tfm::WeightOp>())) {
      if (weight->use_empty()) weight->erase();
    }
    return mlir::success();
  }

 private:
  // The output projection, from which the function's result comes through
  // elementwise ops, split by vocabulary rows and gathered.
  mlir::LogicalResult ShardOutput(mlir::func::FuncOp function) {
    mlir::Operation* terminator = function.getBody().front().getTerminator();
    if (terminator->getNumOperands() != 1) {
      return function.emitOpError() << "returns " << terminator->getNumOperands()
                                    << " values; shard-tensor-parallel expects the logits alone";
    }
    mlir::Value logits = terminator->getOperand(0);
    while (mlir::Operation* op = logits.getDefiningOp()) {
      if (!op->hasTrait<tfm::OpTrait::Elementwise>() || op->getNumOperands() != 1) break;
      logits = op->getOperand(0);
    }
    auto head = logits.getDefiningOp<tfm::LinearOp>();
    if (!head) {
      return function.emitOpError()
             << "returns logits that no output projection (tfm.linear) computes";
    }
    const auto vocabulary = mlir::cast<mlir::RankedTensorType>(head.getType()).getDimSize(1);
    if (vocabulary < ranks_) {
      return head.emitOpError() << "has " << vocabulary << " output rows, fewer than the "
                                << ranks_ << " ranks";
    }
    const Range rows = ShareOf(vocabulary, 1, ranks_, rank_);
    if (mlir::failed(ColumnParallel(head, rows))) return mlir::failure();
    llvm::SmallVector<int64_t> columns;
    for (int64_t r = 0; r < ranks_; ++r) columns.push_back(ShareOf(vocabulary, 1, ranks_, r).size());
    auto whole = mlir::cast<mlir::RankedTensorType>(head.getType());
    llvm::SmallVector<int64_t> shape(whole.getShape());
    shape[1] = vocabulary;
    builder_.setInsertionPointAfter(head);
    auto gather = builder_.create<dist::AllGatherOp>(
        head.getLoc(), mlir::RankedTensorType::get(shape, whole.getElementType()),
        head.getResult(), builder_.getDenseI64ArrayAttr(columns), builder_.getI64IntegerAttr(rank_));
    head.getResult().replaceAllUsesExcept(gather.getResult(), gather);
    return mlir::success();
  }

  // Q, K and V column-parallel for the rank's heads, the attention over
  // them, and the output projection row-parallel.
  mlir::LogicalResult ShardAttention(tfm::AttentionOp attention) {
    auto query = mlir::cast<mlir::RankedTensorType>(attention.getQuery().getType());
    auto key = mlir::cast<mlir::RankedTensorType>(attention.getKey().getType());
    const int64_t head_dim = query.getDimSize(2);
    mlir::FailureOr<HeadShare> share =
        ShareHeads(attention, query.getDimSize(1), key.getDimSize(1), ranks_, rank_);
    if (mlir::failed(share)) return mlir::failure();
    if (mlir::failed(ShardHeads(attention, attention.getQuery(), head_dim, share->query)) ||
        mlir::failed(ShardHeads(attention, attention.getKey(), head_dim, share->kv)) ||
        mlir::failed(ShardHeads(attention, attention.getValue(), head_dim, share->kv))) {
      return mlir::failure();
    }
    SetExtent(attention.getResult(), 1, share->query.size());
    mlir::Value heads = attention.getResult();
    auto flatten = heads.hasOneUse() ? mlir::dyn_cast<tfm::ReshapeOp>(*heads.user_begin())
                                     : tfm::ReshapeOp();
    auto output = flatten && flatten.getResult().hasOneUse()
                      ? mlir::dyn_cast<tfm::LinearOp>(*flatten.getResult().user_begin())
                      : tfm::LinearOp();
    if (!output || output.getInput() != flatten.getResult()) {
      return attention.emitOpError()
             << "is not read by one output projection (a tfm.reshape to [tokens, heads x "
                "head_dim], then a tfm.linear), which shard-tensor-parallel makes row-parallel";
    }
    SetExtent(flatten.getResult(), 1, share->query.size() * head_dim);
    return RowParallel(output, share->query.Times(head_dim));
  }

  // The ops from a projection to the attention's operand `heads`, on the
  // rank's heads: the projection's rows for them, and the reshape to heads
  // and any per-head ops (rope, norms, scaling) after it.
  mlir::LogicalResult ShardHeads(tfm::AttentionOp attention, mlir::Value heads, int64_t head_dim,
                                 Range share) {
    llvm::SmallVector<mlir::Value> per_head;
    mlir::Value value = heads;
    while (true) {
      mlir::Operation* op = value.getDefiningOp();
      if (op == nullptr || !value.hasOneUse()) {
        return attention.emitOpError()
               << "reads an operand that is no projection's alone, which shard-tensor-parallel "
                  "cannot share out by heads";
      }
      per_head.push_back(value);
      if (auto reshape = mlir::dyn_cast<tfm::ReshapeOp>(op)) {
        if (!IsProjection(reshape.getInput())) {
          return attention.emitOpError()
                 << "reads heads reshaped from something other than a projection's result "
                    "(a tfm.linear's, or a tfm.slice_columns view of one) alone";
        }
        for (mlir::Value value : per_head) SetExtent(value, 1, share.size());
        return Project(reshape.getInput(), share.Times(head_dim));
      }
      if (!mlir::isa<tfm::RopeOp, tfm::RmsNormOp, tfm::LayerNormOp, tfm::ScaleOp>(op)) {
        return attention.emitOpError()
               << "reads heads computed by " << op->getName()
               << ", which shard-tensor-parallel does not share out by heads";
      }
      value = op->getOperand(0);
    }
  }

  // A feed-forward block (Passes.td): its intermediate columns shared out.
  // Any other linear stays whole on every rank.
  mlir::LogicalResult ShardFeedForward(tfm::LinearOp down) {
    mlir::Operation* top = down.getInput().getDefiningOp();
    if (top == nullptr || !top->hasTrait<tfm::OpTrait::Elementwise>()) return mlir::success();
    llvm::SmallVector<mlir::Operation*> tree;
    llvm::SmallVector<mlir::Value> projections;
    llvm::SmallVector<mlir::Operation*> pending{top};
    while (!pending.empty()) {
      mlir::Operation* op = pending.pop_back_val();
      if (!op->getResult(0).hasOneUse()) return mlir::success();
      tree.push_back(op);
      for (mlir::Value operand : op->getOperands()) {
        mlir::Operation* producer = operand.getDefiningOp();
        if (producer != nullptr && producer->hasTrait<tfm::OpTrait::Elementwise>()) {
          pending.push_back(producer);
        } else if (IsProjection(operand)) {
          projections.push_back(operand);
        } else {
          return mlir::success();
        }
      }
    }
    if (projections.empty() || llvm::any_of(projections, [&](mlir::Value projection) {
          return ProjectionInput(projection) != ProjectionInput(projections.front());
        })) {
      return mlir::success();
    }
    auto weight = mlir::cast<mlir::RankedTensorType>(down.getWeight().getType());
    const int64_t columns = weight.getDimSize(1);
    const int64_t block = BlockOf(down.getWeight());
    if (columns / block < ranks_) {
      return down.emitOpError() << "has " << columns << " intermediate columns in blocks of "
                                << block << ", fewer blocks than the " << ranks_ << " ranks";
    }
    const Range share = ShareOf(columns, block, ranks_, rank_);
    for (mlir::Value projection : projections) {
      if (mlir::failed(Project(projection, share))) return mlir::failure();
    }
    for (mlir::Operation* op : tree) SetExtent(op->getResult(0), 1, share.size());
    return RowParallel(down, share);
  }

  // A linear's result read by one op, or a view of a fused linear's result
  // (a checkpoint's fused QKV or gate-up, as Phi-3's): its own rows of the
  // weight.
  static bool IsProjection(mlir::Value value) {
    if (!value.hasOneUse()) return false;
    if (value.getDefiningOp<tfm::LinearOp>()) return true;
    auto view = value.getDefiningOp<tfm::SliceColumnsOp>();
    return view && view.getInput().getDefiningOp<tfm::LinearOp>();
  }

  static mlir::Value ProjectionInput(mlir::Value projection) {
    if (auto view = projection.getDefiningOp<tfm::SliceColumnsOp>()) {
      return view.getInput().getDefiningOp<tfm::LinearOp>().getInput();
    }
    return projection.getDefiningOp<tfm::LinearOp>().getInput();
  }

  // The rank's output features `rows` of a projection (IsProjection). A
  // fused linear's views are shared out once all of them are known
  // (ShardFusedProjections).
  mlir::LogicalResult Project(mlir::Value projection, Range rows) {
    if (auto view = projection.getDefiningOp<tfm::SliceColumnsOp>()) {
      fused_views_[view.getInput().getDefiningOp<tfm::LinearOp>()].push_back({view, rows});
      return mlir::success();
    }
    return ColumnParallel(projection.getDefiningOp<tfm::LinearOp>(), rows);
  }

  // Each fused linear whose views were shared out: its weight becomes the
  // concatenation of each view's rows for the rank, in the views' order, and
  // each view the rank's columns of the result.
  mlir::LogicalResult ShardFusedProjections() {
    for (auto& [linear, views] : fused_views_) {
      const size_t users = std::distance(linear->getUsers().begin(), linear->getUsers().end());
      if (users != views.size()) {
        return linear.emitOpError() << "is a fused projection of which only some views are "
                                       "shared out over the ranks; shard-tensor-parallel shares "
                                       "out all of a fused projection's views or none";
      }
      if (linear.getBias()) {
        return linear.emitOpError() << "is a fused projection with a bias, which "
                                       "shard-tensor-parallel does not share out yet";
      }
      llvm::sort(views, [](FusedView a, FusedView b) {
        return a.view.getOffset() < b.view.getOffset();
      });
      tfm::ParamOp param = ParamOf(linear.getWeight());
      if (!param || !param.isModelWeight()) {
        return linear.emitOpError() << "reads a weight that is not a model weight's tfm.param";
      }
      auto type = mlir::cast<mlir::RankedTensorType>(param.getType());
      llvm::SmallVector<mlir::Attribute> parts;
      int64_t rows = 0;
      for (auto [index, part] : llvm::enumerate(views)) {
        const Range own{part.view.getOffset() + part.rows.begin,
                        part.view.getOffset() + part.rows.end};
        const std::string name =
            (param.getSymName() + ".rank" + llvm::Twine(rank_) + ".part" + llvm::Twine(index))
                .str();
        mlir::FailureOr<tfm::ParamOp> sliced = SliceParam(linear, param, 0, own, name);
        if (mlir::failed(sliced)) return mlir::failure();
        parts.push_back(mlir::FlatSymbolRefAttr::get(*sliced));
        builder_.setInsertionPoint(part.view);
        part.view.setOffsetAttr(builder_.getI64IntegerAttr(rows));
        part.view.setSizeAttr(builder_.getI64IntegerAttr(part.rows.size()));
        SetExtent(part.view.getResult(), 1, part.rows.size());
        rows += part.rows.size();
      }
      llvm::SmallVector<int64_t> shape(type.getShape());
      shape[0] = rows;
      auto joined_type = mlir::RankedTensorType::get(shape, type.getElementType());
      builder_.setInsertionPointAfter(param);
      auto joined = builder_.create<tfm::ParamOp>(
          param.getLoc(), builder_.getStringAttr((param.getSymName() + ".rank" +
                                                  llvm::Twine(rank_)).str()),
          mlir::TypeAttr::get(joined_type), param.getStorageAttr(), builder_.getArrayAttr(parts));
      builder_.setInsertionPoint(linear);
      auto read_joined = builder_.create<tfm::WeightOp>(linear.getWeight().getLoc(), joined_type,
                                                        mlir::FlatSymbolRefAttr::get(joined));
      linear.getWeightMutable().assign(read_joined.getResult());
      SetExtent(linear.getResult(), 1, rows);
    }
    return mlir::success();
  }

  // The linear's output features `rows`: those rows of its weight and bias.
  mlir::LogicalResult ColumnParallel(tfm::LinearOp linear, Range rows) {
    mlir::FailureOr<mlir::Value> weight = Slice(linear, linear.getWeight(), 0, rows);
    if (mlir::failed(weight)) return mlir::failure();
    linear.getWeightMutable().assign(*weight);
    if (mlir::Value bias = linear.getBias()) {
      mlir::FailureOr<mlir::Value> sliced = Slice(linear, bias, 0, rows);
      if (mlir::failed(sliced)) return mlir::failure();
      linear.getBiasMutable().assign(*sliced);
    }
    SetExtent(linear.getResult(), 1, rows.size());
    return mlir::success();
  }

  // The linear's input features `columns` (the input holds only those), a
  // partial sum that dist.all_reduce completes; the bias is added once, on
  // rank 0.
  mlir::LogicalResult RowParallel(tfm::LinearOp linear, Range columns) {
    mlir::FailureOr<mlir::Value> weight = Slice(linear, linear.getWeight(), 1, columns);
    if (mlir::failed(weight)) return mlir::failure();
    linear.getWeightMutable().assign(*weight);
    if (rank_ != 0) linear.getBiasMutable().clear();
    builder_.setInsertionPointAfter(linear);
    auto sum = builder_.create<dist::AllReduceOp>(linear.getLoc(), linear.getResult());
    linear.getResult().replaceAllUsesExcept(sum.getResult(), sum);
    return mlir::success();
  }

  // The param a tfm.weight `weight` reads; null for any other value.
  tfm::ParamOp ParamOf(mlir::Value weight) {
    auto read = weight.getDefiningOp<tfm::WeightOp>();
    return read ? module_.lookupSymbol<tfm::ParamOp>(read.getParamAttr()) : tfm::ParamOp();
  }

  // Elements per block of the storage of the param `weight` reads.
  int64_t BlockOf(mlir::Value weight) {
    tfm::ParamOp param = ParamOf(weight);
    return param ? quant::ElementsPerBlock(tfm::ToQuantStorage(param.getStorage())) : 1;
  }

  // A tfm.weight of the rank's slice of the param `weight` reads, before
  // `user`.
  mlir::FailureOr<mlir::Value> Slice(mlir::Operation* user, mlir::Value weight, int64_t axis,
                                     Range range) {
    tfm::ParamOp param = ParamOf(weight);
    if (!param || !param.isModelWeight()) {
      return user->emitOpError()
             << "reads a weight that is not a model weight's tfm.param, which "
                "shard-tensor-parallel cannot slice (run it before fuse-projections)";
    }
    mlir::FailureOr<tfm::ParamOp> sliced =
        SliceParam(user, param, axis, range, (param.getSymName() + ".rank" + llvm::Twine(rank_)).str());
    if (mlir::failed(sliced)) return mlir::failure();
    builder_.setInsertionPoint(user);
    auto read_slice = builder_.create<tfm::WeightOp>(weight.getLoc(), sliced->getType(),
                                                     mlir::FlatSymbolRefAttr::get(*sliced));
    return read_slice.getResult();
  }

  // The param `name`, the rank's `range` of `param` on `axis`, made where
  // it is not yet (a tied output projection reads its embedding's rows).
  mlir::FailureOr<tfm::ParamOp> SliceParam(mlir::Operation* user, tfm::ParamOp param,
                                           int64_t axis, Range range, const std::string& name) {
    const int64_t block = quant::ElementsPerBlock(tfm::ToQuantStorage(param.getStorage()));
    auto type = mlir::cast<mlir::RankedTensorType>(param.getType());
    // Columns that split a block (heads whose columns are not whole blocks:
    // head_dim 64 in blocks of 256) are the block's values dequantized.
    const bool splits_blocks =
        axis == type.getRank() - 1 && (range.begin % block != 0 || range.size() % block != 0);
    tfm::StorageTypeAttr storage =
        splits_blocks ? tfm::StorageTypeAttr::get(module_.getContext(), tfm::StorageType::f32)
                      : param.getStorageAttr();
    llvm::SmallVector<int64_t> shape(type.getShape());
    shape[axis] = range.size();
    auto sliced_type = mlir::RankedTensorType::get(shape, type.getElementType());
    auto sliced = module_.lookupSymbol<tfm::ParamOp>(name);
    if (!sliced) {
      builder_.setInsertionPointAfter(param);
      sliced = builder_.create<tfm::ParamOp>(
          param.getLoc(), builder_.getStringAttr(name), mlir::TypeAttr::get(sliced_type),
          storage, mlir::FlatSymbolRefAttr::get(param), axis, range.begin);
    } else if (sliced.getType() != sliced_type || *sliced.getSliceAxis() != axis ||
               *sliced.getSliceFrom() != range.begin) {
      return user->emitOpError() << "reads @" << param.getSymName()
                                 << ", which another op reads as another slice";
    }
    return sliced;
  }

  // One view of a fused linear's result and the rank's rows of it.
  struct FusedView {
    tfm::SliceColumnsOp view;
    Range rows;
  };

  mlir::ModuleOp module_;
  int64_t ranks_;
  int64_t rank_;
  mlir::OpBuilder builder_;
  llvm::MapVector<tfm::LinearOp, llvm::SmallVector<FusedView>> fused_views_;
};

class ShardTensorParallelPass
    : public impl::ShardTensorParallelBase<ShardTensorParallelPass> {
 public:
  using ShardTensorParallelBase::ShardTensorParallelBase;

  void runOnOperation() override {
    mlir::ModuleOp module = getOperation();
    if (ranks < 1 || rank < 0 || rank >= ranks) {
      module.emitError() << "shard-tensor-parallel: rank " << rank << " of " << ranks
                         << " ranks; ranks must be at least 1 and rank in [0, ranks)";
      return signalPassFailure();
    }
    if (ranks == 1) return markAllAnalysesPreserved();
    if (module->hasAttr(ranksAttrName())) {
      module.emitError() << "shard-tensor-parallel: the module is one rank's program already";
      return signalPassFailure();
    }
    for (auto param : module.getOps<tfm::ParamOp>()) {
      if (param.getConcat()) {
        param.emitOpError() << "is a concatenation of projections: shard-tensor-parallel runs "
                               "before fuse-projections";
        return signalPassFailure();
      }
    }
    Sharder sharder(module, ranks, rank);
    for (auto function : module.getOps<mlir::func::FuncOp>()) {
      if (function.isExternal()) continue;
      if (llvm::any_of(function.getArgumentTypes(),
                       [](mlir::Type type) { return mlir::isa<kv::CacheType>(type); })) {
        function.emitOpError() << "has a KV cache already: shard-tensor-parallel runs before "
                                  "insert-kv-cache";
        return signalPassFailure();
      }
      if (mlir::failed(sharder.Shard(function))) return signalPassFailure();
    }
    mlir::Builder builder(module.getContext());
    module->setAttr(ranksAttrName(), builder.getI64IntegerAttr(ranks));
    module->setAttr(rankAttrName(), builder.getI64IntegerAttr(rank));
  }

 private:
  static llvm::StringRef ranksAttrName() { return dist::DistDialect::RanksAttrHelper::getNameStr(); }
  static llvm::StringRef rankAttrName() { return dist::DistDialect::RankAttrHelper::getNameStr(); }
};

}  // namespace
}  // namespace kvjit
