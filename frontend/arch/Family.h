#ifndef KVJIT_FRONTEND_ARCH_FAMILY_H_
#define KVJIT_FRONTEND_ARCH_FAMILY_H_

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "frontend/arch/HyperParameter.h"

namespace kvjit::arch {

// Which file format a default or a name belongs to.
enum class Format { kGguf, kConfigJson };

// A family's value of a hyper-parameter where the file gives none.
struct Default {
  Param param;
  double value;
  // Only a config.json takes it: transformers' class defaults, which a
  // config.json may leave out and a GGUF always writes.
  bool config_json_only = false;
};

// The feed-forward's gate: act(gate) · up.
enum class Activation {
  kSilu,      // config.json "silu"
  kGeluTanh,  // config.json "gelu_pytorch_tanh"
};

// Which projections carry a bias, as a config.json says (a GGUF shows it by
// its attn_q.bias tensors).
enum class ConfigBiases {
  kNone,                 // never, whatever the config says
  kQkvAlways,            // q, k and v always; o never
  kAttentionBias,        // attention_bias puts one on q, k, v and o
  kAttentionAndMlpBias,  // as kAttentionBias, and mlp_bias on the MLP's three
};

// Which layers attend over a sliding window.
enum class Windows {
  // A GGUF's attention.sliding_window covers every layer; a config.json's
  // sliding_window is not read.
  kGgufOnly,
  // sliding_window (null: none) covers every layer.
  kEveryLayer,
  // With use_sliding_window, the layers from max_window_layers on.
  kFromMaxWindowLayers,
  // Layers alternate local (windowed) and global: every
  // sliding_window_pattern-th layer is global (or, in a config.json,
  // layer_types names each); the window has a default.
  kLocalAndGlobal,
};

// The base local layers (Windows::kLocalAndGlobal) rotate at; global layers
// rotate at rope_theta with the rope scaling.
enum class LocalRope {
  // rope_theta, unscaled. A config.json's model rotates every layer alike.
  kGlobalBase,
  // local_rope_theta, unscaled.
  kOwnBase,
};

// What a layer of the family does beyond the common decoder (pre-norm
// RMSNorm, rotary attention with grouped KV heads, SwiGLU MLP).
struct Layer {
  // llama.cpp's converter permutes this family's q and k rows into
  // interleaved pairs (GPT-J style); other GGUFs and every Hugging Face
  // checkpoint keep rotate-half order (neox style).
  bool gguf_interleaved_rope = false;
  // Each head of q and k RMS-normalized (attn_q_norm, attn_k_norm) before rope.
  bool qk_norm = false;
  // q, k, v as one attn_qkv weight; gate and up as one ffn_up, gate first.
  bool fused_projections = false;
  // The attention's and the MLP's outputs RMS-normalized before their
  // residual adds (post_attention_norm, post_ffw_norm).
  bool post_norms = false;
  Activation activation = Activation::kSilu;
  // The embedding's rows multiplied by sqrt(hidden_size).
  bool embedding_scaled = false;
  // A checkpoint's norm weight w scales by 1 + w (llama.cpp's converter
  // adds the 1 into its GGUFs).
  bool config_norms_plus_one = false;
  // Scores scaled by query_pre_attn_scalar^(-1/2), not head_dim^(-1/2). A
  // GGUF does not store it: llama.cpp takes head_dim, or hidden / heads for
  // the model of gguf_query_scalar_is_hidden_per_head_at layers.
  bool query_pre_attn_scalar = false;
  int64_t gguf_query_scalar_is_hidden_per_head_at = 0;
  Windows windows = Windows::kGgufOnly;
  LocalRope local_rope = LocalRope::kGlobalBase;
};

// Tensor names of a Hugging Face checkpoint that differ from the common map
// (frontend/model/HfModel.cpp), with the GGUF names kvjit knows them by.
struct TensorNames {
  // Within a layer, after "model.layers.<n>.": {checkpoint name, GGUF name
  // after "blk.<n>."}; these win over the common map.
  std::vector<std::pair<absl::string_view, absl::string_view>> layer;
  // Whole-model tensors: {checkpoint name, GGUF name}.
  std::vector<std::pair<absl::string_view, absl::string_view>> model;
  // Prefixes under which a checkpoint keeps the decoder's "model." tensors
  // (a multimodal model's language model).
  std::vector<absl::string_view> decoder_prefixes;
};

// One model family: how both file formats name it and its hyper-parameters,
// and what its layer does. Each family's file under frontend/arch/families/
// states one; frontend/arch/ArchRegistry.h finds them.
struct Family {
  // The family's own name (what `kvjit` and tests call it).
  absl::string_view name;
  // Where the family appears in lists of supported names: the order kvjit
  // took the families in.
  int listed = 0;
  // The architecture the model is built as and recorded under
  // (tfm.architecture, the executable's config): llama.cpp's name for it.
  absl::string_view architecture;
  // GGUF general.architecture values.
  std::vector<absl::string_view> gguf_architectures;
  // config.json model_type values.
  std::vector<absl::string_view> config_model_types;
  // The model_type of a multimodal config.json whose text_config describes
  // this family's decoder (model_type config_model_types[0]); empty: none.
  absl::string_view multimodal_model_type;
  // config.json "architectures" entries that name the family where
  // model_type is absent (older configs).
  std::vector<absl::string_view> config_architectures;
  // The config.json field naming the MLP's activation ("hidden_act" is read
  // where it is absent).
  absl::string_view config_activation_field = "hidden_act";
  ConfigBiases config_biases = ConfigBiases::kNone;
  std::vector<Default> defaults;
  Layer layer;
  TensorNames tensors;

  // The family's default of `param` in `format`, else the common one
  // (Describe(param).fallback).
  std::optional<double> DefaultOf(Param param, Format format) const;
};

}  // namespace kvjit::arch

#endif  // KVJIT_FRONTEND_ARCH_FAMILY_H_
