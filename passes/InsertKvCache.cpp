// insert-kv-cache: the KV cache as a compiler transformation. See Passes.td.

#include <string>

#include "ir/Kv/KvOps.h"
#include "ir/Tfm/TfmOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "passes/Passes.h"
#include "runtime/schema/KvCacheFormat.h"
#include "runtime/schema/StepContract.h"

namespace kvjit {
#define GEN_PASS_DEF_INSERTKVCACHE
#include "passes/Passes.h.inc"

namespace {

using mlir::ShapedType;
using mlir::Value;

// The step function's arguments: one per step input of the step contract
// (runtime/schema/StepContract.h), in its order, then the KV cache.
constexpr unsigned ArgumentOf(kvx::StepInput input) { return static_cast<unsigned>(input); }
constexpr unsigned kCacheArgument = kvx::kStepInputCount;

// The inputs a function has before the pass: the step contract's first two,
// which the model needs without a cache.
constexpr unsigned kModelArguments = 2;
static_assert(kvx::kStepInputs[0].input == kvx::StepInput::Tokens &&
                  kvx::kStepInputs[1].input == kvx::StepInput::Positions,
              "a model without a cache takes the step's tokens and positions");

// The tensor type of a step input: i32, each dimension known per step.
mlir::RankedTensorType StepInputType(mlir::MLIRContext* context, const kvx::StepInputSpec& spec) {
  const llvm::SmallVector<int64_t, kvx::kMaxStepInputRank> shape(spec.rank, ShapedType::kDynamic);
  return mlir::RankedTensorType::get(
      shape, mlir::IntegerType::get(context, 8 * sizeof(kvx::StepInputElement)));
}

// The value whose rows the returned logits are computed from one by one:
// walking up through ops that commute with a row gather, each value with a
// single user. Gathering the rows there computes the final norm and output
// projection only where needed.
mlir::OpOperand* RowsFeedingLogits(Value logits) {
  mlir::OpOperand* feed = nullptr;
  Value current = logits;
  while (mlir::Operation* op = current.getDefiningOp()) {
    const bool used_elsewhere = current != logits && !current.hasOneUse();
    if (!op->hasTrait<tfm::OpTrait::CommutesWithRowGather>() || used_elsewhere) break;
    feed = &op->getOpOperand(0);
    current = feed->get();
  }
  return feed;
}

struct InsertKvCachePass : impl::InsertKvCacheBase<InsertKvCachePass> {
  using InsertKvCacheBase::InsertKvCacheBase;

  void runOnOperation() override {
    bool converted = false;
    for (auto function : llvm::make_early_inc_range(getOperation().getOps<mlir::func::FuncOp>())) {
      if (function.isExternal() || function.getOps<tfm::AttentionOp>().empty()) continue;
      if (mlir::failed(Convert(function))) return signalPassFailure();
      converted = true;
    }
    if (!converted) {
      getOperation().emitError(
          "insert-kv-cache found no function with tfm.attention; run fuse-attention first");
      signalPassFailure();
    }
  }

  // `name` as a cache element type, or `fallback` where `name` is empty.
  mlir::FailureOr<kv::CacheElement> CacheElement(mlir::func::FuncOp function, llvm::StringRef option,
                                                 llvm::StringRef name, kv::CacheElement fallback) {
    if (name.empty()) return fallback;
    std::optional<kv::CacheElement> element = kv::symbolizeCacheElement(name);
    if (!element) {
      return function.emitError() << option << " must be one of " << kvx::kKvCacheFormatNames
                                  << ", got '" << name << "'";
    }
    return *element;
  }

  mlir::LogicalResult Convert(mlir::func::FuncOp function) {
    mlir::FunctionType type = function.getFunctionType();
    bool takes_model_arguments = type.getNumInputs() == kModelArguments && type.getNumResults() == 1;
    std::string expected;
    llvm::raw_string_ostream expected_stream(expected);
    for (unsigned i = 0; i < kModelArguments; ++i) {
      const mlir::Type argument = StepInputType(&getContext(), kvx::kStepInputs[i]);
      takes_model_arguments = takes_model_arguments && type.getInput(i) == argument;
      expected_stream << (i > 0 ? ", " : "") << kvx::kStepInputs[i].name << ": " << argument;
    }
    if (!takes_model_arguments) {
      return function.emitError() << "insert-kv-cache expects (" << expected_stream.str()
                                  << ") -> logits, got " << type;
    }
    if (blockSize <= 0) return function.emitError() << "block-size must be positive";

    llvm::SmallVector<tfm::AttentionOp> layers(function.getOps<tfm::AttentionOp>());
    auto key_type = mlir::cast<mlir::RankedTensorType>(layers.front().getKey().getType());
    for (tfm::AttentionOp attention : layers) {
      if (!attention.getCausal()) {
        return attention.emitOpError() << "is not causal; a decoder's KV cache needs causal attention";
      }
      if (attention.getKey().getType() != key_type) {
        return attention.emitOpError() << "has keys of type " << attention.getKey().getType()
                                       << " unlike layer 0's " << key_type
                                       << "; one cache needs one shape";
      }
    }
    if (key_type.isDynamicDim(1) || key_type.isDynamicDim(2)) {
      return layers.front().emitOpError() << "needs static kv_heads and head_dim, got " << key_type;
    }
    mlir::FailureOr<kv::CacheElement> both =
        CacheElement(function, "cache-dtype", cacheElementType, kv::CacheElement::f32);
    if (mlir::failed(both)) return mlir::failure();
    mlir::FailureOr<kv::CacheElement> keys =
        CacheElement(function, "cache-dtype-k", keyElementType, *both);
    mlir::FailureOr<kv::CacheElement> values =
        CacheElement(function, "cache-dtype-v", valueElementType, *both);
    if (mlir::failed(keys) || mlir::failed(values)) return mlir::failure();
    if (rotation != "auto" && rotation != "none") {
      return function.emitError() << "rotation must be auto or none, got '" << rotation << "'";
    }
    const int64_t head_dim = key_type.getDimSize(2);
    auto rotation_of = [&](kv::CacheElement element, int64_t block) -> int64_t {
      return rotation == "auto" && kvx::IsBlockQuantized(kv::CacheFormat(element).type) ? block : 0;
    };
    auto cache_type = kv::CacheType::getChecked(
        [&] { return function.emitError(); }, &getContext(), static_cast<int64_t>(layers.size()),
        key_type.getDimSize(1), head_dim, static_cast<int64_t>(blockSize), *keys, *values,
        rotation_of(*keys, kvx::KeyRotationBlock(head_dim)),
        rotation_of(*values, kvx::ValueRotationBlock(head_dim)));
    if (!cache_type) return mlir::failure();

    mlir::Block& body = function.getBody().front();
    mlir::Location loc = function.getLoc();
    for (const kvx::StepInputSpec& spec :
         llvm::ArrayRef<kvx::StepInputSpec>(kvx::kStepInputs).drop_front(kModelArguments)) {
      body.addArgument(StepInputType(&getContext(), spec), loc);
    }
    body.addArgument(cache_type, loc);
    function.setFunctionType(mlir::FunctionType::get(&getContext(), body.getArgumentTypes(),
                                                     type.getResults()));

    mlir::OpBuilder builder(&getContext());
    for (auto [layer, attention] : llvm::enumerate(layers)) {
      builder.setInsertionPoint(attention);
      auto step_input = [&](kvx::StepInput input) { return body.getArgument(ArgumentOf(input)); };
      builder.create<kv::WriteOp>(attention.getLoc(), body.getArgument(kCacheArgument),
                                  attention.getKey(), attention.getValue(),
                                  step_input(kvx::StepInput::SlotMapping),
                                  builder.getI64IntegerAttr(layer));
      Value cached = builder.create<kv::AttentionOp>(
          attention.getLoc(), attention.getType(), attention.getQuery(),
          body.getArgument(kCacheArgument), builder.getI64IntegerAttr(layer),
          step_input(kvx::StepInput::Positions), step_input(kvx::StepInput::SeqStarts),
          step_input(kvx::StepInput::ContextLens), step_input(kvx::StepInput::BlockTables),
          attention.getScaleAttr(), attention.getWindowAttr(), attention.getSoftcapAttr());
      attention.replaceAllUsesWith(cached);
      attention.erase();
    }

    auto ret = mlir::cast<mlir::func::ReturnOp>(body.getTerminator());
    Value logits = ret.getOperand(0);
    mlir::OpOperand* feed = RowsFeedingLogits(logits);
    if (feed == nullptr) {
      return ret.emitOpError() << "returns logits that no op commuting with a row gather "
                                  "computes; cannot select logits_rows";
    }
    builder.setInsertionPoint(feed->getOwner());
    Value gathered = builder.create<tfm::GatherRowsOp>(
        feed->getOwner()->getLoc(), feed->get().getType(), feed->get(),
        body.getArgument(ArgumentOf(kvx::StepInput::LogitsRows)));
    feed->set(gathered);

    function.setSymName("step");
    function->setAttr("kv.step_function", builder.getUnitAttr());
    return mlir::success();
  }
};

}  // namespace
}  // namespace kvjit
