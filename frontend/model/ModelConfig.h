#ifndef KVJIT_FRONTEND_MODEL_MODELCONFIG_H_
#define KVJIT_FRONTEND_MODEL_MODELCONFIG_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "ir/Tfm/RopeScaling.h"

namespace kvjit::model {

enum class RopeStyle {
  kInterleaved,  // pairs (2i, 2i+1): GGUF llama checkpoints
  kNeox,         // pairs (i, i + d/2): Hugging Face checkpoints, GGUF qwen2
};

using ::kvjit::RopeScaling;
using ::kvjit::RopeScalingKind;

// The hyper-parameters of a Llama-family decoder (Llama 2 and 3, TinyLlama,
// SmolLM2, Mistral, Qwen2, Qwen3), whichever file format they came from.
struct ModelConfig {
  std::string architecture;  // "llama", "qwen2" or "qwen3"
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
  // Per-pair divisors of the rope angle (a GGUF's rope_freqs tensor, Llama
  // 3.1's scaling as llama.cpp stores it), head_dim / 2 of them; empty: none.
  std::vector<float> rope_freq_factors;
  bool tied_embeddings = false;
  bool qkv_bias = false;
  // Qwen3: each head of q and k RMS-normalized (weight [head_dim]) before rope.
  bool qk_norm = false;

  // Refuses sizes that cannot describe a working model; `source` names the
  // file in the message.
  absl::Status Validate(const std::string& source) const;

  // Bytes of K and V one token occupies in the cache:
  // 2 × layers × kv_heads × head_dim × bytes_per_element.
  uint64_t KvCacheBytesPerToken(uint64_t bytes_per_element) const;
};

}  // namespace kvjit::model

#endif  // KVJIT_FRONTEND_MODEL_MODELCONFIG_H_
