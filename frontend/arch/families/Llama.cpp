// Llama 2 and 3 (with Llama 3.1's rope scaling), and the checkpoints built
// on its decoder: TinyLlama, SmolLM2. llama.cpp also writes GGUFs of other
// families that share this decoder under this architecture.

#include "frontend/arch/Family.h"

namespace kvjit::arch::families {

const Family& LlamaFamily() {
  static const Family family = [] {
    Family llama;
    llama.name = "llama";
    llama.listed = 1;
    llama.architecture = "llama";
    llama.gguf_architectures = {"llama"};
    llama.config_model_types = {"llama"};
    llama.config_architectures = {"LlamaForCausalLM"};
    llama.config_biases = ConfigBiases::kAttentionAndMlpBias;
    llama.layer.gguf_interleaved_rope = true;
    return llama;
  }();
  return family;
}

}  // namespace kvjit::arch::families
