#include "frontend/model/DecoderBuilder.h"

#include <cmath>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ir/Tfm/TfmOps.h"
#include "ir/Tfm/TfmStorage.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Verifier.h"

namespace kvjit::model {
namespace {

using mlir::ShapedType;
using mlir::Value;

std::string ShapeToString(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

class DecoderEmitter {
 public:
  DecoderEmitter(mlir::MLIRContext& context, const ModelConfig& config, const WeightSource& weights)
      : config_(config),
        weights_(weights),
        builder_(&context),
        loc_(mlir::FileLineColLoc::get(&context, weights.origin(), 0, 0)),
        f32_(builder_.getF32Type()) {}

  absl::StatusOr<mlir::OwningOpRef<mlir::ModuleOp>> Emit();

 private:
  struct Required {
    std::string name;
    std::vector<int64_t> shape;
  };

  // Every weight the architecture reads, with the shape the config implies.
  std::vector<Required> RequiredWeights() const;
  absl::Status CheckWeights() const;
  std::string OutputWeightName() const;

  mlir::RankedTensorType Activation(llvm::ArrayRef<int64_t> shape) {
    return mlir::RankedTensorType::get(shape, f32_);
  }
  // The model file's weight `name`, declared once.
  tfm::ParamOp Param(const std::string& name);
  Value Weight(const std::string& name);
  // An RMSNorm's scale: its weight, or 1 + its weight where the checkpoint
  // stores it so (`name`.plus_one, shifted from `name`).
  Value NormScale(const std::string& name);
  Value Linear(Value input, const std::string& weight, const std::string& bias = "");
  // Columns [offset, offset + size) of a [T, features] activation.
  Value Columns(Value input, int64_t offset, int64_t size);
  Value RmsNorm(Value input, const std::string& weight);
  // cap · tanh(x / cap), elementwise (soft-capping).
  Value SoftCap(Value x, double cap);
  Value Rope(Value heads, Value positions, int64_t layer);
  Value Attention(int64_t layer, Value q, Value k, Value v);
  Value Block(int64_t layer, Value x, Value positions);

  const ModelConfig& config_;
  const WeightSource& weights_;
  mlir::OpBuilder builder_;
  mlir::Location loc_;
  mlir::FloatType f32_;
  mlir::ModuleOp module_;
  std::map<std::string, tfm::ParamOp> params_;
};

std::string DecoderEmitter::OutputWeightName() const {
  return weights_.Find("output.weight") ? "output.weight" : "token_embd.weight";
}

std::vector<DecoderEmitter::Required> DecoderEmitter::RequiredWeights() const {
  const int64_t d = config_.hidden_size;
  const int64_t q_width = config_.num_heads * config_.head_dim;
  const int64_t kv_width = config_.num_kv_heads * config_.head_dim;
  const int64_t ffn = config_.intermediate_size;
  std::vector<Required> required = {{"token_embd.weight", {config_.vocab_size, d}},
                                    {"output_norm.weight", {d}},
                                    {OutputWeightName(), {config_.vocab_size, d}}};
  for (int64_t layer = 0; layer < config_.num_layers; ++layer) {
    std::string prefix = absl::StrCat("blk.", layer, ".");
    std::vector<Required> block = {{"attn_norm.weight", {d}},
                                   {"attn_output.weight", {d, q_width}},
                                   {"ffn_norm.weight", {d}},
                                   {"ffn_down.weight", {d, ffn}}};
    if (config_.fused_projections) {
      block.push_back({"attn_qkv.weight", {q_width + 2 * kv_width, d}});
      block.push_back({"ffn_up.weight", {2 * ffn, d}});
    } else {
      block.push_back({"attn_q.weight", {q_width, d}});
      block.push_back({"attn_k.weight", {kv_width, d}});
      block.push_back({"attn_v.weight", {kv_width, d}});
      block.push_back({"ffn_gate.weight", {ffn, d}});
      block.push_back({"ffn_up.weight", {ffn, d}});
    }
    if (config_.qkv_bias) {
      block.push_back({"attn_q.bias", {q_width}});
      block.push_back({"attn_k.bias", {kv_width}});
      block.push_back({"attn_v.bias", {kv_width}});
    }
    if (config_.post_norms) {
      block.push_back({"post_attention_norm.weight", {d}});
      block.push_back({"post_ffw_norm.weight", {d}});
    }
    if (config_.qk_norm) {
      block.push_back({"attn_q_norm.weight", {config_.head_dim}});
      block.push_back({"attn_k_norm.weight", {config_.head_dim}});
    }
    for (Required& weight : block) {
      weight.name = prefix + weight.name;
      required.push_back(std::move(weight));
    }
  }
  return required;
}

absl::Status DecoderEmitter::CheckWeights() const {
  if (!config_.tied_embeddings && !weights_.Find("output.weight")) {
    return absl::NotFoundError(absl::StrCat(
        weights_.origin(), ": tensor 'output.weight' is missing and the model does not tie its "
                           "embeddings"));
  }
  for (const Required& required : RequiredWeights()) {
    const WeightInfo* weight = weights_.Find(required.name);
    if (weight == nullptr) {
      return absl::NotFoundError(absl::StrCat(weights_.origin(), ": tensor '", required.name,
                                              "' is missing (the ", config_.architecture,
                                              " architecture needs it)"));
    }
    if (weight->shape != required.shape) {
      return absl::InvalidArgumentError(absl::StrCat(
          weights_.origin(), ": tensor '", required.name, "' has shape ",
          ShapeToString(weight->shape), " but the ", config_.architecture,
          " model's hyper-parameters need ", ShapeToString(required.shape)));
    }
  }
  return absl::OkStatus();
}

tfm::ParamOp DecoderEmitter::Param(const std::string& name) {
  auto [it, inserted] = params_.try_emplace(name);
  if (inserted) {
    const WeightInfo* info = weights_.Find(name);
    mlir::OpBuilder::InsertionGuard guard(builder_);
    builder_.setInsertionPoint(module_.getBody(), std::prev(module_.getBody()->end()));
    it->second = builder_.create<tfm::ParamOp>(
        loc_, builder_.getStringAttr(name), mlir::TypeAttr::get(Activation(info->shape)),
        tfm::StorageTypeAttr::get(builder_.getContext(), tfm::FromQuantStorage(info->storage)));
  }
  return it->second;
}

Value DecoderEmitter::Weight(const std::string& name) {
  tfm::ParamOp param = Param(name);
  return builder_.create<tfm::WeightOp>(loc_, param.getType(), mlir::FlatSymbolRefAttr::get(param));
}

Value DecoderEmitter::NormScale(const std::string& name) {
  if (!config_.norm_weights_plus_one) return Weight(name);
  tfm::ParamOp source = Param(name);
  auto [it, inserted] = params_.try_emplace(name + ".plus_one");
  if (inserted) {
    mlir::OpBuilder::InsertionGuard guard(builder_);
    builder_.setInsertionPointAfter(source);
    it->second = builder_.create<tfm::ParamOp>(
        loc_, builder_.getStringAttr(it->first), mlir::TypeAttr::get(source.getType()),
        tfm::StorageTypeAttr::get(builder_.getContext(), tfm::StorageType::f32),
        /*concat=*/nullptr, mlir::FlatSymbolRefAttr::get(source), builder_.getF32FloatAttr(1.0f));
  }
  return builder_.create<tfm::WeightOp>(loc_, it->second.getType(),
                                        mlir::FlatSymbolRefAttr::get(it->second));
}

Value DecoderEmitter::Linear(Value input, const std::string& weight, const std::string& bias) {
  Value w = Weight(weight);
  Value b = bias.empty() ? Value() : Weight(bias);
  int64_t out = mlir::cast<mlir::RankedTensorType>(w.getType()).getDimSize(0);
  return builder_.create<tfm::LinearOp>(loc_, Activation({ShapedType::kDynamic, out}), input, w, b);
}

Value DecoderEmitter::Columns(Value input, int64_t offset, int64_t size) {
  return builder_.create<tfm::SliceColumnsOp>(loc_, Activation({ShapedType::kDynamic, size}), input,
                                              builder_.getI64IntegerAttr(offset),
                                              builder_.getI64IntegerAttr(size));
}

Value DecoderEmitter::RmsNorm(Value input, const std::string& weight) {
  return builder_.create<tfm::RmsNormOp>(loc_, input.getType(), input, NormScale(weight),
                                         builder_.getF32FloatAttr(config_.rms_norm_eps));
}

Value DecoderEmitter::SoftCap(Value x, double cap) {
  auto scale = [&](Value input, double factor) -> Value {
    return builder_.create<tfm::ScaleOp>(loc_, input.getType(), input,
                                         builder_.getF32FloatAttr(factor));
  };
  return scale(builder_.create<tfm::TanhOp>(loc_, scale(x, 1.0 / cap)), cap);
}

Value DecoderEmitter::Rope(Value heads, Value positions, int64_t layer) {
  auto style = config_.rope_style == RopeStyle::kNeox ? tfm::RopeStyle::neox
                                                      : tfm::RopeStyle::interleaved;
  // Local layers rotate at their own base and unscaled.
  const bool local = config_.IsLocalLayer(layer);
  tfm::RopeScalingAttr scaling;
  const RopeScaling& s = config_.rope_scaling;
  if (s.kind != RopeScalingKind::kNone && !local) {
    scaling = tfm::RopeScalingAttr::get(
        builder_.getContext(),
        s.kind == RopeScalingKind::kLinear ? tfm::RopeScalingKind::linear
                                           : tfm::RopeScalingKind::llama3,
        llvm::APFloat(s.factor), llvm::APFloat(s.low_freq_factor),
        llvm::APFloat(s.high_freq_factor), s.original_context);
  }
  mlir::DenseF32ArrayAttr freq_factors;
  if (!config_.rope_freq_factors.empty() && !local) {
    freq_factors = builder_.getDenseF32ArrayAttr(config_.rope_freq_factors);
  }
  return builder_.create<tfm::RopeOp>(
      loc_, heads.getType(), heads, positions,
      tfm::RopeStyleAttr::get(builder_.getContext(), style),
      builder_.getF32FloatAttr(local ? config_.local_rope_theta : config_.rope_theta),
      mlir::IntegerAttr(), scaling, freq_factors);
}

// softmax(Q·Kᵀ / sqrt(head_dim) + causal mask) · V over [T, heads, head_dim]
// inputs, each KV head shared by heads / kv_heads query heads; a soft cap
// soft-caps the scaled scores before the mask.
Value DecoderEmitter::Attention(int64_t layer, Value q, Value k, Value v) {
  const int64_t heads = config_.num_heads;
  const int64_t head_dim = config_.head_dim;
  const int64_t group = config_.num_heads / config_.num_kv_heads;
  const int64_t dyn = ShapedType::kDynamic;
  if (group > 1) {
    auto repeated = Activation({dyn, heads, head_dim});
    k = builder_.create<tfm::RepeatOp>(loc_, repeated, k, builder_.getI64IntegerAttr(1),
                                       builder_.getI64IntegerAttr(group));
    v = builder_.create<tfm::RepeatOp>(loc_, repeated, v, builder_.getI64IntegerAttr(1),
                                       builder_.getI64IntegerAttr(group));
  }
  auto transpose = [&](Value value, llvm::ArrayRef<int64_t> permutation,
                       llvm::ArrayRef<int64_t> shape) -> Value {
    return builder_.create<tfm::TransposeOp>(loc_, Activation(shape), value,
                                             builder_.getDenseI64ArrayAttr(permutation));
  };
  Value qh = transpose(q, {1, 0, 2}, {heads, dyn, head_dim});
  Value kt = transpose(k, {1, 2, 0}, {heads, head_dim, dyn});
  Value vh = transpose(v, {1, 0, 2}, {heads, dyn, head_dim});
  auto scores_type = Activation({heads, dyn, dyn});
  Value scores = builder_.create<tfm::MatmulOp>(loc_, scores_type, qh, kt);
  Value scaled = builder_.create<tfm::ScaleOp>(
      loc_, scores_type, scores,
      builder_.getF32FloatAttr(config_.attention_scale > 0
                                   ? config_.attention_scale
                                   : 1.0 / std::sqrt(static_cast<double>(head_dim))));
  if (config_.attention_softcap > 0) scaled = SoftCap(scaled, config_.attention_softcap);
  const int64_t window = config_.layer_windows.empty() ? 0 : config_.layer_windows[layer];
  Value masked = builder_.create<tfm::CausalMaskOp>(
      loc_, scores_type, scaled, window > 0 ? builder_.getI64IntegerAttr(window) : nullptr);
  Value probs = builder_.create<tfm::SoftmaxOp>(loc_, scores_type, masked,
                                                builder_.getI64IntegerAttr(-1));
  Value context = builder_.create<tfm::MatmulOp>(loc_, Activation({heads, dyn, head_dim}), probs, vh);
  Value tokens_first = transpose(context, {1, 0, 2}, {dyn, heads, head_dim});
  return builder_.create<tfm::ReshapeOp>(loc_, Activation({dyn, heads * head_dim}), tokens_first);
}

Value DecoderEmitter::Block(int64_t layer, Value x, Value positions) {
  const std::string p = absl::StrCat("blk.", layer, ".");
  const int64_t dyn = ShapedType::kDynamic;
  auto bias = [&](const char* name) {
    return config_.qkv_bias ? p + name : std::string();
  };
  Value h = RmsNorm(x, p + "attn_norm.weight");
  Value q, k, v;
  if (config_.fused_projections) {
    const int64_t q_width = config_.num_heads * config_.head_dim;
    const int64_t kv_width = config_.num_kv_heads * config_.head_dim;
    Value qkv = Linear(h, p + "attn_qkv.weight");
    q = Columns(qkv, 0, q_width);
    k = Columns(qkv, q_width, kv_width);
    v = Columns(qkv, q_width + kv_width, kv_width);
  } else {
    q = Linear(h, p + "attn_q.weight", bias("attn_q.bias"));
    k = Linear(h, p + "attn_k.weight", bias("attn_k.bias"));
    v = Linear(h, p + "attn_v.weight", bias("attn_v.bias"));
  }
  auto heads_of = [&](Value flat, int64_t count) -> Value {
    return builder_.create<tfm::ReshapeOp>(loc_, Activation({dyn, count, config_.head_dim}), flat);
  };
  // With qk_norm, each head of q and k is RMS-normalized before rope.
  auto normed_heads_of = [&](Value flat, int64_t count, const char* norm) -> Value {
    Value heads = heads_of(flat, count);
    return config_.qk_norm ? RmsNorm(heads, p + norm) : heads;
  };
  Value q_heads =
      Rope(normed_heads_of(q, config_.num_heads, "attn_q_norm.weight"), positions, layer);
  Value k_heads =
      Rope(normed_heads_of(k, config_.num_kv_heads, "attn_k_norm.weight"), positions, layer);
  // LongRoPE's attention factor multiplies rope's cos and sin. Applied to q
  // and k themselves (not folded into the scores' scale), the cache holds k
  // as llama.cpp's does, rounded after the factor.
  if (config_.rope_attention_factor != 1.0) {
    auto scaled = [&](Value heads) -> Value {
      return builder_.create<tfm::ScaleOp>(
          loc_, heads.getType(), heads, builder_.getF32FloatAttr(config_.rope_attention_factor));
    };
    q_heads = scaled(q_heads);
    k_heads = scaled(k_heads);
  }
  Value v_heads = heads_of(v, config_.num_kv_heads);
  Value attention = Linear(Attention(layer, q_heads, k_heads, v_heads), p + "attn_output.weight");
  if (config_.post_norms) attention = RmsNorm(attention, p + "post_attention_norm.weight");
  Value x1 = builder_.create<tfm::AddOp>(loc_, x, attention);

  Value h2 = RmsNorm(x1, p + "ffn_norm.weight");
  Value gate, up;
  if (config_.fused_projections) {
    const int64_t ffn = config_.intermediate_size;
    Value gate_up = Linear(h2, p + "ffn_up.weight");
    gate = Columns(gate_up, 0, ffn);
    up = Columns(gate_up, ffn, ffn);
  } else {
    gate = Linear(h2, p + "ffn_gate.weight");
    up = Linear(h2, p + "ffn_up.weight");
  }
  Value activated = config_.gelu_ffn
                        ? builder_.create<tfm::GeluOp>(loc_, gate.getType(), gate,
                                                       builder_.getUnitAttr())
                              .getResult()
                        : builder_.create<tfm::SiluOp>(loc_, gate).getResult();
  Value gated = builder_.create<tfm::MulOp>(loc_, activated, up);
  Value down = Linear(gated, p + "ffn_down.weight");
  if (config_.post_norms) down = RmsNorm(down, p + "post_ffw_norm.weight");
  return builder_.create<tfm::AddOp>(loc_, x1, down);
}

absl::StatusOr<mlir::OwningOpRef<mlir::ModuleOp>> DecoderEmitter::Emit() {
  if (absl::Status status = config_.Validate(weights_.origin()); !status.ok()) return status;
  if (absl::Status status = CheckWeights(); !status.ok()) return status;

  mlir::OwningOpRef<mlir::ModuleOp> module = mlir::ModuleOp::create(loc_);
  module_ = *module;
  module_->setAttr("tfm.architecture", builder_.getStringAttr(config_.architecture));
  module_->setAttr("tfm.context_length", builder_.getI64IntegerAttr(config_.context_length));

  auto ids = mlir::RankedTensorType::get({ShapedType::kDynamic}, builder_.getI32Type());
  auto logits = Activation({ShapedType::kDynamic, config_.vocab_size});
  builder_.setInsertionPointToEnd(module_.getBody());
  auto forward = builder_.create<mlir::func::FuncOp>(
      loc_, kForwardFunctionName, builder_.getFunctionType({ids, ids}, {logits}));
  mlir::Block* entry = forward.addEntryBlock();
  builder_.setInsertionPointToStart(entry);
  Value tokens = entry->getArgument(0);
  Value positions = entry->getArgument(1);

  Value x = builder_.create<tfm::EmbeddingOp>(
      loc_, Activation({ShapedType::kDynamic, config_.hidden_size}), Weight("token_embd.weight"),
      tokens);
  if (config_.embedding_scale != 1.0) {
    x = builder_.create<tfm::ScaleOp>(loc_, x.getType(), x,
                                      builder_.getF32FloatAttr(config_.embedding_scale));
  }
  for (int64_t layer = 0; layer < config_.num_layers; ++layer) x = Block(layer, x, positions);
  Value normed = RmsNorm(x, "output_norm.weight");
  Value out = Linear(normed, OutputWeightName());
  if (config_.final_logit_softcap > 0) out = SoftCap(out, config_.final_logit_softcap);
  builder_.create<mlir::func::ReturnOp>(loc_, out);

  if (mlir::failed(mlir::verify(module_))) {
    return absl::InternalError(absl::StrCat(weights_.origin(),
                                            ": the emitted tfm IR does not verify"));
  }
  return module;
}

}  // namespace

absl::StatusOr<mlir::OwningOpRef<mlir::ModuleOp>> BuildDecoderModule(mlir::MLIRContext& context,
                                                                   const ModelConfig& config,
                                                                   const WeightSource& weights) {
  context.loadDialect<tfm::TfmDialect, mlir::func::FuncDialect>();
  return DecoderEmitter(context, config, weights).Emit();
}

}  // namespace kvjit::model
