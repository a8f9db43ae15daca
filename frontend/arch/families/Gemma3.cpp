// Gemma 3: Gemma 2's layer without soft caps and with q and k normalized per
// head; five local layers to every global one, the local ones rotating at
// base 10000, unscaled. A multimodal checkpoint (model_type gemma3) keeps the
// decoder's settings in text_config, leaving out those equal to transformers'
// Gemma3TextConfig defaults, and its tensors under language_model.

#include "frontend/arch/Family.h"

namespace kvjit::arch::families {

const Family& Gemma3Family() {
  static const Family family = [] {
    Family gemma3;
    gemma3.name = "gemma3";
    gemma3.listed = 7;
    gemma3.architecture = "gemma3";
    gemma3.gguf_architectures = {"gemma3"};
    gemma3.config_model_types = {"gemma3_text"};
    gemma3.multimodal_model_type = "gemma3";
    gemma3.config_architectures = {"Gemma3ForCausalLM"};
    gemma3.config_activation_field = "hidden_activation";
    gemma3.config_biases = ConfigBiases::kAttentionBias;
    constexpr bool kConfigJsonOnly = true;
    gemma3.defaults = {{Param::kSlidingWindow, 4096},
                       {Param::kSlidingWindowPattern, 6},
                       {Param::kLocalRopeTheta, 10000},
                       {Param::kQueryPreAttnScalar, 256},
                       {Param::kTieWordEmbeddings, 1},
                       {Param::kHiddenSize, 2304, kConfigJsonOnly},
                       {Param::kIntermediateSize, 9216, kConfigJsonOnly},
                       {Param::kNumLayers, 26, kConfigJsonOnly},
                       {Param::kNumHeads, 8, kConfigJsonOnly},
                       {Param::kNumKvHeads, 4, kConfigJsonOnly},
                       {Param::kHeadDim, 256, kConfigJsonOnly},
                       {Param::kContextLength, 131072, kConfigJsonOnly},
                       {Param::kVocabSize, 262208, kConfigJsonOnly},
                       {Param::kRmsNormEps, 1e-6, kConfigJsonOnly},
                       {Param::kRopeTheta, 1e6, kConfigJsonOnly}};
    Layer& layer = gemma3.layer;
    layer.qk_norm = true;
    layer.post_norms = true;
    layer.activation = Activation::kGeluTanh;
    layer.embedding_scaled = true;
    layer.config_norms_plus_one = true;
    layer.query_pre_attn_scalar = true;
    // llama.cpp knows the 27B model by its 62 layers.
    layer.gguf_query_scalar_is_hidden_per_head_at = 62;
    layer.windows = Windows::kLocalAndGlobal;
    layer.local_rope = LocalRope::kOwnBase;
    gemma3.tensors.layer = {{"post_attention_layernorm.weight", "post_attention_norm.weight"},
                            {"pre_feedforward_layernorm.weight", "ffn_norm.weight"},
                            {"post_feedforward_layernorm.weight", "post_ffw_norm.weight"}};
    // transformers 4 saves the multimodal decoder as language_model.model.*,
    // transformers 5 as model.language_model.*.
    gemma3.tensors.decoder_prefixes = {"language_model.model.", "model.language_model."};
    gemma3.tensors.model = {{"language_model.lm_head.weight", "output.weight"}};
    return gemma3;
  }();
  return family;
}

}  // namespace kvjit::arch::families
