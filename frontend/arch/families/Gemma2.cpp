// Gemma 2: embeddings scaled by sqrt(hidden), norms after attention and after
// the MLP (each checkpoint norm weight w scaling by 1 + w), gelu_tanh(gate) ·
// up, scores scaled by query_pre_attn_scalar^(-1/2) and soft-capped, the
// logits soft-capped; even layers local (sliding window), odd ones global,
// all at one rope base. The defaults are transformers' Gemma2Config and
// llama.cpp's: window 4096, soft caps 50 (scores) and 30 (logits).

#include "frontend/arch/Family.h"

namespace kvjit::arch::families {

const Family& Gemma2Family() {
  static const Family family = [] {
    Family gemma2;
    gemma2.name = "gemma2";
    gemma2.listed = 6;
    gemma2.architecture = "gemma2";
    gemma2.gguf_architectures = {"gemma2"};
    gemma2.config_model_types = {"gemma2"};
    gemma2.config_architectures = {"Gemma2ForCausalLM"};
    gemma2.config_activation_field = "hidden_activation";
    gemma2.config_biases = ConfigBiases::kAttentionBias;
    gemma2.defaults = {{Param::kSlidingWindow, 4096},
                       {Param::kSlidingWindowPattern, 2},
                       {Param::kAttentionSoftcap, 50},
                       {Param::kFinalLogitSoftcap, 30},
                       {Param::kQueryPreAttnScalar, 256},
                       {Param::kTieWordEmbeddings, 1}};
    Layer& layer = gemma2.layer;
    layer.post_norms = true;
    layer.activation = Activation::kGeluTanh;
    layer.embedding_scaled = true;
    layer.config_norms_plus_one = true;
    layer.query_pre_attn_scalar = true;
    // llama.cpp knows the 27B model by its 46 layers.
    layer.gguf_query_scalar_is_hidden_per_head_at = 46;
    layer.windows = Windows::kLocalAndGlobal;
    layer.local_rope = LocalRope::kGlobalBase;
    // post_attention_layernorm normalizes the attention's output, not the
    // MLP's input as Llama's does; the MLP has a norm before and after.
    gemma2.tensors.layer = {{"post_attention_layernorm.weight", "post_attention_norm.weight"},
                            {"pre_feedforward_layernorm.weight", "ffn_norm.weight"},
                            {"post_feedforward_layernorm.weight", "post_ffw_norm.weight"}};
    return gemma2;
  }();
  return family;
}

}  // namespace kvjit::arch::families
