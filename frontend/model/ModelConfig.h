#ifndef KVJIT_FRONTEND_MODEL_MODELCONFIG_H_
#define KVJIT_FRONTEND_MODEL_MODELCONFIG_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "ir/Tfm/RopeScaling.h"

namespace kvjit::model {

enum class RopeStyle {
  kInterleaved,  // pairs (2i, 2i+1): GGUFs whose q and k rows llama.cpp permuted
  kNeox,         // pairs (i, i + d/2): Hugging Face checkpoints, the other GGUFs
};

using ::kvjit::RopeScaling;
using ::kvjit::RopeScalingKind;

// The hyper-parameters of a decoder of a family in the architecture registry
// (frontend/arch), whichever file format they came from, with the family's
// layer resolved into them: what the decoder builder reads.
struct ModelConfig {
  std::string architecture;  // the family's arch::Family::architecture
  std::string name;
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t context_length = 0;
  double rms_norm_eps = 1e-5;
  double rope_theta = 10000.0;
  RopeStyle rope_style = RopeStyle::kInterleaved;
  RopeScaling rope_scaling;
  // Per-pair divisors of the rope angle (a GGUF's rope_freqs tensor, llama3
  // scaling as llama.cpp stores it), head_dim / 2 of them; empty: none.
  std::vector<float> rope_freq_factors;
  // Multiplies rope's cos and sin for q and k alike (LongRoPE's
  // attention factor), so attention scores grow by its square.
  double rope_attention_factor = 1.0;
  bool tied_embeddings = false;
  bool qkv_bias = false;
  // Each head of q and k RMS-normalized (weight [head_dim]) before rope.
  bool qk_norm = false;
  // q, k and v as one weight attn_qkv [q + 2 kv widths, hidden], and
  // gate and up as one ffn_up [2 × intermediate, hidden], gate first.
  bool fused_projections = false;
  // Sliding-window attention:
  // empty where every layer attends over the whole context, else one entry
  // per layer, its window in positions or 0 for the whole context. The query
  // at position p attends to keys j with p - window < j <= p.
  std::vector<int64_t> layer_windows;

  // The embedding's rows multiplied by this (sqrt(hidden_size) where the
  // family scales them).
  double embedding_scale = 1.0;
  // The attention output and the FFN output RMS-normalized before their
  // residual adds (post_attention_norm, post_ffw_norm).
  bool post_norms = false;
  // gelu_tanh(gate) · up instead of silu(gate) · up.
  bool gelu_ffn = false;
  // Scores scaled by this instead of 1 / sqrt(head_dim) (such as
  // 1 / sqrt(query_pre_attn_scalar)); 0: 1 / sqrt(head_dim).
  double attention_scale = 0.0;
  // Layers alternate local (sliding-window) and global attention: layer i is
  // global where (i + 1) is a multiple of this; 0: every layer is global.
  // Local layers rotate with local_rope_theta and no rope scaling; their
  // windows are in layer_windows.
  int64_t global_layer_period = 0;
  double local_rope_theta = 10000.0;
  // Each RMSNorm's scale is 1 + its weight (some families' Hugging Face
  // checkpoints; llama.cpp's converter adds the 1 into its GGUFs), derived
  // at compile time as a `tfm.param ... shifted` weight.
  bool norm_weights_plus_one = false;
  // Soft-capping, cap · tanh(x / cap), of the attention scores
  // after their scale (attn_logit_softcapping) and of the logits
  // (final_logit_softcapping); 0: none.
  double attention_softcap = 0.0;
  double final_logit_softcap = 0.0;

  bool IsLocalLayer(int64_t layer) const {
    return global_layer_period > 0 && (layer + 1) % global_layer_period != 0;
  }

  // Refuses sizes that cannot describe a working model; `source` names the
  // file in the message.
  absl::Status Validate(const std::string& source) const;

  // Bytes of K and V one token occupies in the cache:
  // 2 × layers × kv_heads × head_dim × bytes_per_element.
  uint64_t KvCacheBytesPerToken(uint64_t bytes_per_element) const;
};

}  // namespace kvjit::model

#endif  // KVJIT_FRONTEND_MODEL_MODELCONFIG_H_
