#ifndef KVJIT_FRONTEND_SAFETENSORS_HFCONFIG_H_
#define KVJIT_FRONTEND_SAFETENSORS_HFCONFIG_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "frontend/arch/Family.h"
#include "ir/Tfm/RopeScaling.h"
#include "runtime/quant/StorageType.h"

namespace kvjit::hf {

// LongRoPE ("longrope", formerly "su"): each rotated pair's angle
// divided by its entry of long_factor where the model's context exceeds
// original_max_position_embeddings, else of short_factor; cos and sin
// multiplied by attention_factor (default sqrt(1 + ln(s) / ln(original)) for
// s = context / original, 1 when s <= 1).
struct LongRope {
  std::vector<double> short_factor;  // head_dim / 2 divisors each
  std::vector<double> long_factor;
  std::optional<double> attention_factor;  // where the config gives it
  int64_t original_max_position_embeddings = 0;
};

// A checkpoint's config.json, for a decoder of a family in the architecture
// registry (frontend/arch), which says how its fields are read.
//
// Rotary layout: Hugging Face checkpoints keep q_proj and k_proj rows in the
// order of the reference "rotate-half" rope (GPT-NeoX style), which pairs
// element i of each head with element i + head_dim/2. llama.cpp's converter
// permutes those rows when it writes a llama GGUF, so that GGUF pairs
// elements 2i and 2i+1 (interleaved, GPT-J style). A model built from
// safetensors must therefore use rope style neox, and one built from a llama
// GGUF style interleaved; the two agree on the attention they compute
// (tests/unit/frontend/huggingface/RopeStyle_test.cpp shows it).
//
// Sliding-window attention, as transformers applies it: where the family
// reads sliding_window (arch::Windows), to every layer, or with
// use_sliding_window to the layers from max_window_layers on, or to the
// local layers; a config's layer_types list ("sliding_attention" /
// "full_attention"), where it has one, names each layer's kind.
struct DecoderConfig {
  // The family model_type (or architectures) names; never null in a parsed config.
  const arch::Family* family = nullptr;
  // The first entry of "architectures" (the transformers model class), or empty.
  std::string architecture;

  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;  // defaults to num_attention_heads
  int64_t head_dim = 0;             // defaults to hidden_size / num_attention_heads
  int64_t max_position_embeddings = 0;
  int64_t vocab_size = 0;

  double rms_norm_eps = 0.0;
  double rope_theta = 10000.0;
  // rope_scaling (or transformers 5's rope_parameters); original_context is
  // its original_max_position_embeddings.
  RopeScaling rope_scaling;
  // LongRoPE, which the model reader turns into frequency factors.
  std::optional<LongRope> long_rope;

  // One entry per layer, its sliding window or 0 for full attention; empty
  // where no layer has a window.
  std::vector<int64_t> layer_windows;

  bool tie_word_embeddings = false;
  // Biases as the family reads them (arch::ConfigBiases): on q_proj, k_proj
  // and v_proj; on o_proj; on gate_proj, up_proj and down_proj.
  bool attention_qkv_bias = false;
  bool attention_output_bias = false;
  bool mlp_bias = false;

  // Scores scaled by query_pre_attn_scalar^(-1/2) where the family says so;
  // the soft caps cap · tanh(x / cap) of the scaled scores and of the logits
  // (0: none); the rope base of the sliding layers (rope_local_base_freq, or
  // transformers 5's rope_parameters.sliding_attention.rope_theta).
  double query_pre_attn_scalar = 0.0;
  double attn_logit_softcapping = 0.0;
  double final_logit_softcapping = 0.0;
  double local_rope_theta = 10000.0;

  // Empty where the config names none; a list where it names several.
  std::vector<int64_t> bos_token_ids;
  std::vector<int64_t> eos_token_ids;
  // The dtype the weights were trained in ("torch_dtype", or "dtype" in newer
  // configs); nullopt where absent.
  std::optional<quant::StorageType> torch_dtype;
};

// Parses config.json text; `source` names the file in error messages.
absl::StatusOr<DecoderConfig> ParseDecoderConfig(absl::string_view json_text,
                                                 absl::string_view source = "config.json");

// Reads `directory`/config.json.
absl::StatusOr<DecoderConfig> LoadDecoderConfig(const std::string& directory);

}  // namespace kvjit::hf

#endif  // KVJIT_FRONTEND_SAFETENSORS_HFCONFIG_H_
