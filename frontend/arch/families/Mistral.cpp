// Mistral: Llama's decoder with a sliding window on every layer (null in v0.2
// and later) and no biases. llama.cpp writes its GGUFs as llama, so it is
// built and recorded as that architecture.

#include "frontend/arch/Family.h"

namespace kvjit::arch::families {

const Family& MistralFamily() {
  static const Family family = [] {
    Family mistral;
    mistral.name = "mistral";
    mistral.listed = 2;
    mistral.architecture = "llama";
    mistral.config_model_types = {"mistral"};
    mistral.config_architectures = {"MistralForCausalLM"};
    mistral.config_biases = ConfigBiases::kNone;
    mistral.layer.windows = Windows::kEveryLayer;
    return mistral;
  }();
  return family;
}

}  // namespace kvjit::arch::families
