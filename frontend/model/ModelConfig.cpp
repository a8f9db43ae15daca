#include "frontend/model/ModelConfig.h"

#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"

namespace kvjit::model {

absl::Status ModelConfig::Validate(const std::string& source) const {
  auto invalid = [&](auto... parts) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": ", parts...));
  };
  struct Positive {
    const char* field;
    int64_t value;
  };
  for (const Positive& size : {Positive{"vocab_size", vocab_size},
                               Positive{"hidden_size", hidden_size},
                               Positive{"intermediate_size", intermediate_size},
                               Positive{"num_layers", num_layers},
                               Positive{"num_heads", num_heads},
                               Positive{"num_kv_heads", num_kv_heads},
                               Positive{"head_dim", head_dim},
                               Positive{"context_length", context_length}}) {
    if (size.value <= 0) return invalid(size.field, " must be positive, got ", size.value);
  }
  if (num_heads % num_kv_heads != 0) {
    return invalid("num_heads (", num_heads, ") is not a multiple of num_kv_heads (",
                   num_kv_heads, ")");
  }
  if (head_dim % 2 != 0) return invalid("head_dim must be even for rotary embedding, got ", head_dim);
  if (!(rms_norm_eps > 0)) return invalid("rms_norm_eps must be positive, got ", rms_norm_eps);
  if (!(rope_theta > 0)) return invalid("rope_theta must be positive, got ", rope_theta);
  if (rope_scaling.kind != RopeScalingKind::kNone && !(rope_scaling.factor > 0)) {
    return invalid("rope scaling factor must be positive, got ", rope_scaling.factor);
  }
  if (rope_scaling.kind == RopeScalingKind::kLlama3 && rope_scaling.original_context <= 0) {
    return invalid("llama3 rope scaling needs original_context");
  }
  if (!rope_freq_factors.empty()) {
    if (rope_scaling.kind != RopeScalingKind::kNone) {
      return invalid("rope frequency factors (rope_freqs) and a rope scaling type are exclusive");
    }
    if (static_cast<int64_t>(rope_freq_factors.size()) != head_dim / 2) {
      return invalid(rope_freq_factors.size(), " rope frequency factors for head_dim ", head_dim,
                     " (needs head_dim / 2)");
    }
    for (float factor : rope_freq_factors) {
      if (!(factor > 0) || std::isinf(factor)) {
        return invalid("rope frequency factors must be positive and finite, got ", factor);
      }
    }
  }
  if (!(embedding_scale > 0) || std::isinf(embedding_scale)) {
    return invalid("the embedding scale must be positive and finite, got ", embedding_scale);
  }
  if (attention_scale < 0 || std::isinf(attention_scale)) {
    return invalid("the attention scale must be positive and finite, got ", attention_scale);
  }
  for (const auto& [name, cap] : {std::pair<const char*, double>{"attention", attention_softcap},
                                  std::pair<const char*, double>{"final logit", final_logit_softcap}}) {
    if (cap < 0 || !std::isfinite(cap)) {
      return invalid("the ", name, " soft cap must be positive and finite (or 0 for none), got ", cap);
    }
  }
  if (global_layer_period < 0) return invalid("global_layer_period must not be negative");
  if (global_layer_period > 0 && !(local_rope_theta > 0)) {
    return invalid("the local layers' rope theta must be positive, got ", local_rope_theta);
  }
  if (!(rope_attention_factor > 0) || std::isinf(rope_attention_factor)) {
    return invalid("the rope attention factor must be positive and finite, got ",
                   rope_attention_factor);
  }
  if (!layer_windows.empty()) {
    if (static_cast<int64_t>(layer_windows.size()) != num_layers) {
      return invalid(layer_windows.size(), " sliding windows for ", num_layers, " layers");
    }
    for (int64_t window : layer_windows) {
      if (window < 0) return invalid("a sliding window must be positive, got ", window);
    }
  }
  return absl::OkStatus();
}

uint64_t ModelConfig::KvCacheBytesPerToken(uint64_t bytes_per_element) const {
  return 2 * static_cast<uint64_t>(num_layers) * static_cast<uint64_t>(num_kv_heads) *
         static_cast<uint64_t>(head_dim) * bytes_per_element;
}

}  // namespace kvjit::model
