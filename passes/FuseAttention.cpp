// fuse-attention: softmax(Q·Kᵀ·scale + causal mask)·V, written out op by op
// the way the frontend emits it, becomes one tfm.attention. The contract is in
// Passes.td; the matcher below accepts only chains whose fused form computes
// exactly what the chain did, so a chain it does not recognise stays as it is.

#include <array>
#include <cmath>
#include <cstdint>
#include <utility>

#include "ir/Tfm/TfmOps.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/TypeUtilities.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "passes/Passes.h"

namespace kvjit {
#define GEN_PASS_DEF_FUSEATTENTION
#include "passes/Passes.h.inc"

namespace {

using mlir::failure;
using mlir::LogicalResult;
using mlir::RankedTensorType;
using mlir::ShapedType;
using mlir::success;
using mlir::Value;

// [T, heads, d] <-> [heads, T, d]
constexpr std::array<int64_t, 3> kSwapTokensAndHeads = {1, 0, 2};
// [S, heads, d] -> [heads, d, S]: K transposed per head, ready for Q·Kᵀ.
constexpr std::array<int64_t, 3> kKeysToHeadColumns = {1, 2, 0};
// Grouped-query attention repeats each KV head along this axis of [S, kv_heads, d].
constexpr int64_t kHeadAxis = 1;

// The op of type OpTy that defines `value`, provided the chain being matched
// is its only reader: fusing an intermediate that something else also reads
// would leave the unfused chain alive beside the fused op.
template <typename OpTy>
OpTy DefinerWithSoleUse(Value value) {
  if (!value.hasOneUse()) return nullptr;
  return value.getDefiningOp<OpTy>();
}

tfm::TransposeOp SoleUseTranspose(Value value, llvm::ArrayRef<int64_t> permutation) {
  auto transpose = DefinerWithSoleUse<tfm::TransposeOp>(value);
  if (!transpose || transpose.getPermutation() != permutation) return nullptr;
  return transpose;
}

bool IsOverLastAxis(tfm::SoftmaxOp softmax) {
  const int64_t rank = mlir::cast<RankedTensorType>(softmax.getType()).getRank();
  const int64_t axis = softmax.getAxisAttr().getInt();
  return axis == -1 || axis == rank - 1;
}

// With K and V repeated alike on the head axis, attention can read the
// shared heads directly (query head h reads KV head h / repeats, which is what
// the repetition spelled out), so later passes keep kv_heads in the cache
// rather than heads. Any other repetition is just part of the operand.
std::pair<Value, Value> SharedKeyValueHeads(Value key, Value value, Value query) {
  auto key_repeat = DefinerWithSoleUse<tfm::RepeatOp>(key);
  auto value_repeat = DefinerWithSoleUse<tfm::RepeatOp>(value);
  if (!key_repeat || !value_repeat) return {key, value};
  const int64_t repeats = key_repeat.getRepeatsAttr().getInt();
  auto shared_type = mlir::cast<RankedTensorType>(key_repeat.getInput().getType());
  // Checked here rather than trusted to the matmul's verifier, which lets a
  // dynamic head count in the repeat's result stand for any number of heads.
  const int64_t heads = mlir::cast<RankedTensorType>(query.getType()).getDimSize(kHeadAxis);
  const int64_t kv_heads = shared_type.getDimSize(kHeadAxis);
  const bool repeated_alike =
      key_repeat.getAxisAttr().getInt() == kHeadAxis &&
      value_repeat.getAxisAttr().getInt() == kHeadAxis &&
      value_repeat.getRepeatsAttr().getInt() == repeats &&
      value_repeat.getInput().getType() == shared_type && !ShapedType::isDynamic(heads) &&
      !ShapedType::isDynamic(kv_heads) && kv_heads * repeats == heads;
  if (!repeated_alike) return {key, value};
  return {key_repeat.getInput(), value_repeat.getInput()};
}

// Gemma 2's soft-capping of the scores, cap · tanh(s / cap), as the
// frontend writes it: tfm.scale by 1 / cap, tfm.tanh, tfm.scale by cap.
// Returns the cap and moves `scores` to the capped input; a chain whose
// factors are not a positive cap and its f32 reciprocal is no soft cap.
mlir::FloatAttr MatchSoftCap(Value& scores) {
  auto outer = DefinerWithSoleUse<tfm::ScaleOp>(scores);
  if (!outer) return nullptr;
  auto tanh = DefinerWithSoleUse<tfm::TanhOp>(outer.getInput());
  if (!tanh) return nullptr;
  auto inner = DefinerWithSoleUse<tfm::ScaleOp>(tanh.getInput());
  if (!inner) return nullptr;
  const float cap = outer.getFactor().convertToFloat();
  if (!(cap > 0) || std::isinf(cap) ||
      inner.getFactor().convertToFloat() != static_cast<float>(1.0 / cap)) {
    return nullptr;
  }
  scores = inner.getInput();
  return outer.getFactorAttr();
}

// What tfm.attention's verifier asks of its operands and of `result`, the
// type the fused op must keep for the chain's users. The chain's own
// verifiers do not imply it: a dynamic dimension in the middle of the chain
// can join two different static sizes at its ends.
bool FitsAttention(Value query, Value key, Value value, RankedTensorType result) {
  auto query_type = mlir::cast<RankedTensorType>(query.getType());
  auto key_type = mlir::cast<RankedTensorType>(key.getType());
  if (key_type != value.getType() || query_type.getRank() != 3 || key_type.getRank() != 3) {
    return false;
  }
  const int64_t heads = query_type.getDimSize(1);
  const int64_t kv_heads = key_type.getDimSize(1);
  if (ShapedType::isDynamic(heads) || ShapedType::isDynamic(kv_heads) || kv_heads == 0 ||
      heads % kv_heads != 0) {
    return false;
  }
  const int64_t head_dim = query_type.getDimSize(2);
  return mlir::succeeded(mlir::verifyCompatibleShape({head_dim}, {key_type.getDimSize(2)})) &&
         mlir::succeeded(mlir::verifyCompatibleShape(
             result.getShape(), {query_type.getDimSize(0), heads, head_dim}));
}

// Anchored on the final transpose back to token-major order and matched
// upwards, so that every op of the chain is known to feed this one attention.
struct FuseAttentionChain : mlir::OpRewritePattern<tfm::TransposeOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(tfm::TransposeOp to_tokens,
                                mlir::PatternRewriter& rewriter) const override {
    if (to_tokens.getPermutation() != llvm::ArrayRef<int64_t>(kSwapTokensAndHeads)) {
      return failure();
    }
    auto weighted_values = DefinerWithSoleUse<tfm::MatmulOp>(to_tokens.getInput());
    if (!weighted_values) return failure();
    auto probabilities = DefinerWithSoleUse<tfm::SoftmaxOp>(weighted_values.getLhs());
    if (!probabilities || !IsOverLastAxis(probabilities)) return failure();

    // Only scale-then-mask is accepted: a scale after the mask multiplies its
    // -inf as well, which agrees with masking last only for positive factors.
    Value logits = probabilities.getInput();
    bool causal = false;
    mlir::IntegerAttr window;
    if (auto mask = DefinerWithSoleUse<tfm::CausalMaskOp>(logits)) {
      causal = true;
      window = mask.getWindowAttr();
      logits = mask.getInput();
    }
    mlir::FloatAttr softcap = MatchSoftCap(logits);
    mlir::FloatAttr scale = rewriter.getF32FloatAttr(1.0f);
    if (auto scaled = DefinerWithSoleUse<tfm::ScaleOp>(logits)) {
      scale = scaled.getFactorAttr();
      logits = scaled.getInput();
    }
    auto scores = DefinerWithSoleUse<tfm::MatmulOp>(logits);
    if (!scores) return failure();

    tfm::TransposeOp query_heads = SoleUseTranspose(scores.getLhs(), kSwapTokensAndHeads);
    tfm::TransposeOp key_columns = SoleUseTranspose(scores.getRhs(), kKeysToHeadColumns);
    tfm::TransposeOp value_heads =
        SoleUseTranspose(weighted_values.getRhs(), kSwapTokensAndHeads);
    if (!query_heads || !key_columns || !value_heads) return failure();

    Value query = query_heads.getInput();
    auto [key, value] =
        SharedKeyValueHeads(key_columns.getInput(), value_heads.getInput(), query);
    auto result_type = mlir::cast<RankedTensorType>(to_tokens.getType());
    if (!FitsAttention(query, key, value, result_type)) return failure();

    // The rest of the chain is Pure and now unused: the greedy driver erases it.
    rewriter.replaceOpWithNewOp<tfm::AttentionOp>(to_tokens, result_type, query, key, value,
                                                  scale,
                                                  causal ? rewriter.getUnitAttr() : nullptr,
                                                  window, softcap);
    return success();
  }
};

struct FuseAttentionPass : impl::FuseAttentionBase<FuseAttentionPass> {
  using FuseAttentionBase::FuseAttentionBase;

  void runOnOperation() override {
    mlir::RewritePatternSet patterns(&getContext());
    patterns.add<FuseAttentionChain>(&getContext());
    // Only this fusion: no block merging or other region rewrites on the side.
    mlir::GreedyRewriteConfig config;
    config.enableRegionSimplification = mlir::GreedySimplifyRegionLevel::Disabled;
    if (mlir::failed(
            mlir::applyPatternsAndFoldGreedily(getOperation(), std::move(patterns), config))) {
      getOperation().emitError("fuse-attention did not converge");
      signalPassFailure();
    }
  }
};

}  // namespace
}  // namespace kvjit
