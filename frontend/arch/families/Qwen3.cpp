// Qwen3: each head of q and k RMS-normalized before rope, and no q/k/v
// biases of its own (attention_bias, off in every released checkpoint,
// biases all four projections).

#include "frontend/arch/Family.h"

namespace kvjit::arch::families {

const Family& Qwen3Family() {
  static const Family family = [] {
    Family qwen3;
    qwen3.name = "qwen3";
    qwen3.listed = 4;
    qwen3.architecture = "qwen3";
    qwen3.gguf_architectures = {"qwen3"};
    qwen3.config_model_types = {"qwen3"};
    qwen3.config_architectures = {"Qwen3ForCausalLM"};
    qwen3.config_biases = ConfigBiases::kAttentionBias;
    qwen3.layer.qk_norm = true;
    qwen3.layer.windows = Windows::kFromMaxWindowLayers;
    // transformers' Qwen3Config.
    qwen3.defaults = {{Param::kMaxWindowLayers, 28}};
    return qwen3;
  }();
  return family;
}

}  // namespace kvjit::arch::families
