// Qwen2 and Qwen2.5: biases on q, k and v; with use_sliding_window, windows
// on the layers from max_window_layers on.

#include "frontend/arch/Family.h"

namespace kvjit::arch::families {

const Family& Qwen2Family() {
  static const Family family = [] {
    Family qwen2;
    qwen2.name = "qwen2";
    qwen2.listed = 3;
    qwen2.architecture = "qwen2";
    qwen2.gguf_architectures = {"qwen2"};
    qwen2.config_model_types = {"qwen2"};
    qwen2.config_architectures = {"Qwen2ForCausalLM"};
    qwen2.config_biases = ConfigBiases::kQkvAlways;
    qwen2.layer.windows = Windows::kFromMaxWindowLayers;
    // transformers' Qwen2Config.
    qwen2.defaults = {{Param::kMaxWindowLayers, 28}};
    return qwen2;
  }();
  return family;
}

}  // namespace kvjit::arch::families
