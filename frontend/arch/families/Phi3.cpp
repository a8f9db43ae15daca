// Phi-3: q, k and v as one qkv_proj, gate and up as one gate_up_proj; no
// biases (Phi3Attention's projections are bias=False whatever the config);
// a sliding window on every layer (llama.cpp writes 0 for none); LongRoPE.

#include "frontend/arch/Family.h"

namespace kvjit::arch::families {

const Family& Phi3Family() {
  static const Family family = [] {
    Family phi3;
    phi3.name = "phi3";
    phi3.listed = 5;
    phi3.architecture = "phi3";
    phi3.gguf_architectures = {"phi3"};
    phi3.config_model_types = {"phi3"};
    phi3.config_architectures = {"Phi3ForCausalLM"};
    phi3.config_biases = ConfigBiases::kNone;
    phi3.layer.fused_projections = true;
    phi3.layer.windows = Windows::kEveryLayer;
    // The fused projections, as llama.cpp names them.
    phi3.tensors.layer = {{"self_attn.qkv_proj.weight", "attn_qkv.weight"},
                          {"mlp.gate_up_proj.weight", "ffn_up.weight"}};
    return phi3;
  }();
  return family;
}

}  // namespace kvjit::arch::families
