#include "frontend/model/HfModel.h"

#include <cmath>
#include <regex>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "runtime/core/StatusMacros.h"

namespace kvjit::model {

namespace {

// LongRoPE as transformers computes it for a model run at its
// max_position_embeddings (and llama.cpp for a context that large): the long
// factors where that exceeds the original context, else the short ones.
absl::Status ApplyLongRope(const hf::DecoderConfig& hf, const std::string& source,
                           ModelConfig& config) {
  const hf::LongRope& scaling = *hf.long_rope;
  const size_t pairs = static_cast<size_t>(hf.head_dim / 2);
  for (const auto* factors : {&scaling.short_factor, &scaling.long_factor}) {
    if (factors->size() != pairs) {
      return absl::InvalidArgumentError(absl::StrCat(
          source, ": rope_scaling's ", factors == &scaling.short_factor ? "short" : "long",
          "_factor has ", factors->size(), " entries; head_dim ", hf.head_dim, " needs ", pairs));
    }
  }
  const double original = static_cast<double>(scaling.original_max_position_embeddings);
  const double scale = static_cast<double>(hf.max_position_embeddings) / original;
  const std::vector<double>& chosen = scale > 1.0 ? scaling.long_factor : scaling.short_factor;
  config.rope_freq_factors.assign(chosen.begin(), chosen.end());
  config.rope_attention_factor = scaling.attention_factor.value_or(
      scale <= 1.0 ? 1.0 : std::sqrt(1.0 + std::log(scale) / std::log(original)));
  return absl::OkStatus();
}

// Local layers that rotate at their own base, unscaled: ModelConfig knows
// them as all but every global_layer_period-th layer. The period that gives
// `windows`' sliding layers, or an error naming the layer kinds.
absl::StatusOr<int64_t> GlobalLayerPeriod(const std::vector<int64_t>& windows, int64_t layers,
                                          const std::string& source) {
  if (windows.empty()) return 0;
  for (int64_t period = 1; period <= layers + 1; ++period) {
    bool fits = true;
    for (int64_t layer = 0; fits && layer < layers; ++layer) {
      fits = (windows[static_cast<size_t>(layer)] > 0) == ((layer + 1) % period != 0);
    }
    if (fits) return period;
  }
  return absl::UnimplementedError(absl::StrCat(
      source, ": layer_types does not repeat as n - 1 sliding_attention layers and one "
              "full_attention layer, the only mix of local and global layers kvjit builds"));
}

// The family's departures from the common layer, as transformers computes
// them.
absl::Status ApplyLayer(const hf::DecoderConfig& hf, const std::string& source,
                        ModelConfig& config) {
  const arch::Layer& layer = hf.family->layer;
  config.qk_norm = layer.qk_norm;
  config.fused_projections = layer.fused_projections;
  config.post_norms = layer.post_norms;
  config.gelu_ffn = layer.activation == arch::Activation::kGeluTanh;
  config.norm_weights_plus_one = layer.config_norms_plus_one;
  if (layer.embedding_scaled) {
    config.embedding_scale = std::sqrt(static_cast<double>(hf.hidden_size));
  }
  if (layer.query_pre_attn_scalar) {
    config.attention_scale = 1.0 / std::sqrt(hf.query_pre_attn_scalar);
  }
  config.attention_softcap = hf.attn_logit_softcapping;
  config.final_logit_softcap = hf.final_logit_softcapping;
  // Local layers at the global base rotate as transformers rotates them: all
  // alike, with one rotary embedding.
  if (layer.windows == arch::Windows::kLocalAndGlobal &&
      layer.local_rope == arch::LocalRope::kOwnBase) {
    KVJIT_ASSIGN_OR_RETURN(config.global_layer_period,
                           GlobalLayerPeriod(hf.layer_windows, hf.num_hidden_layers, source));
    config.local_rope_theta = hf.local_rope_theta;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ModelConfig> ModelConfigFromHf(const hf::DecoderConfig& hf,
                                              const std::string& source) {
  if (hf.attention_output_bias || hf.mlp_bias) {
    return absl::UnimplementedError(absl::StrCat(
        source, ": attention_bias on o_proj and mlp_bias are not supported yet"));
  }
  ModelConfig config;
  config.architecture = std::string(hf.family->architecture);
  config.name = hf.architecture;
  config.vocab_size = hf.vocab_size;
  config.hidden_size = hf.hidden_size;
  config.intermediate_size = hf.intermediate_size;
  config.num_layers = hf.num_hidden_layers;
  config.num_heads = hf.num_attention_heads;
  config.num_kv_heads = hf.num_key_value_heads;
  config.head_dim = hf.head_dim;
  config.context_length = hf.max_position_embeddings;
  config.rms_norm_eps = hf.rms_norm_eps;
  config.rope_theta = hf.rope_theta;
  config.rope_style = RopeStyle::kNeox;
  config.tied_embeddings = hf.tie_word_embeddings;
  config.qkv_bias = hf.attention_qkv_bias;
  config.layer_windows = hf.layer_windows;
  config.rope_scaling = hf.rope_scaling;
  if (hf.long_rope) KVJIT_RETURN_IF_ERROR(ApplyLongRope(hf, source, config));
  KVJIT_RETURN_IF_ERROR(ApplyLayer(hf, source, config));
  KVJIT_RETURN_IF_ERROR(config.Validate(source));
  return config;
}

std::string CanonicalWeightName(const std::string& hf_name, const arch::Family* family) {
  if (family != nullptr) {
    for (absl::string_view prefix : family->tensors.decoder_prefixes) {
      if (absl::StartsWith(hf_name, prefix) && hf_name.size() > prefix.size()) {
        return CanonicalWeightName(absl::StrCat("model.", hf_name.substr(prefix.size())), family);
      }
    }
    for (const auto& [hf, canonical] : family->tensors.model) {
      if (hf_name == hf) return std::string(canonical);
    }
  }
  static const std::pair<const char*, const char*> kGlobal[] = {
      {"model.embed_tokens.weight", "token_embd.weight"},
      {"model.norm.weight", "output_norm.weight"},
      {"lm_head.weight", "output.weight"},
  };
  for (const auto& [hf, canonical] : kGlobal) {
    if (hf_name == hf) return canonical;
  }
  static const std::pair<const char*, const char*> kPerLayer[] = {
      {"input_layernorm.weight", "attn_norm.weight"},
      {"self_attn.q_proj.weight", "attn_q.weight"},
      {"self_attn.k_proj.weight", "attn_k.weight"},
      {"self_attn.v_proj.weight", "attn_v.weight"},
      {"self_attn.q_proj.bias", "attn_q.bias"},
      {"self_attn.k_proj.bias", "attn_k.bias"},
      {"self_attn.v_proj.bias", "attn_v.bias"},
      {"self_attn.o_proj.weight", "attn_output.weight"},
      {"self_attn.q_norm.weight", "attn_q_norm.weight"},
      {"self_attn.k_norm.weight", "attn_k_norm.weight"},
      {"post_attention_layernorm.weight", "ffn_norm.weight"},
      {"mlp.gate_proj.weight", "ffn_gate.weight"},
      {"mlp.up_proj.weight", "ffn_up.weight"},
      {"mlp.down_proj.weight", "ffn_down.weight"},
  };
  static const std::regex kLayer(R"(model\.layers\.(\d+)\.(.+))");
  std::smatch match;
  if (std::regex_match(hf_name, match, kLayer)) {
    if (family != nullptr) {
      for (const auto& [hf, canonical] : family->tensors.layer) {
        if (match[2].str() == hf) return absl::StrCat("blk.", match[1].str(), ".", canonical);
      }
    }
    for (const auto& [hf, canonical] : kPerLayer) {
      if (match[2] == hf) return absl::StrCat("blk.", match[1].str(), ".", canonical);
    }
  }
  return hf_name;
}

SafetensorsWeightSource::SafetensorsWeightSource(const safetensors::SafetensorsModel& model,
                                                 const arch::Family* family)
    : model_(model) {
  for (const safetensors::SafetensorsFile& shard : model.shards()) {
    for (const safetensors::Tensor& tensor : shard.tensors()) {
      WeightInfo weight;
      weight.name = CanonicalWeightName(tensor.name, family);
      weight.shape = tensor.dims;
      weight.storage = tensor.storage_type;
      weight.size_bytes = tensor.data.size();
      weights_.push_back(std::move(weight));
      tensors_.push_back(&tensor);
    }
  }
}

absl::Span<const uint8_t> SafetensorsWeightSource::Bytes(const WeightInfo& weight) const {
  for (size_t i = 0; i < weights_.size(); ++i) {
    if (weights_[i].name == weight.name) return tensors_[i]->data;
  }
  return {};
}

}  // namespace kvjit::model
