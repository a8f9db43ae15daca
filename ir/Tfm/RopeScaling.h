#ifndef KVJIT_IR_TFM_ROPESCALING_H_
#define KVJIT_IR_TFM_ROPESCALING_H_

#include <cstdint>

// The compiler's one description of rotary frequency scaling, with its one
// set of defaults: the model readers (GGUF, config.json) fill it, the
// `#tfm.rope_scaling` attribute takes its defaults from it, and the
// reference kernels compute with it. Plain C++ in ir/ so that every layer
// above (frontend, reference evaluator) can share it; the runtime has its
// own in runtime/schema/kvx.fbs.
namespace kvjit {

enum class RopeScalingKind {
  kNone,
  // Every frequency divided by `factor` (positions interpolated).
  kLinear,
  // Llama 3.1: wavelengths shorter than original_context / high_freq_factor
  // are kept, those longer than original_context / low_freq_factor are
  // divided by `factor`, and the band between is interpolated smoothly.
  kLlama3,
};

struct RopeScaling {
  RopeScalingKind kind = RopeScalingKind::kNone;
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  // The context the model was trained for (config.json's
  // original_max_position_embeddings); llama3 only.
  int64_t original_context = 0;
};

}  // namespace kvjit

#endif  // KVJIT_IR_TFM_ROPESCALING_H_
