#ifndef KVJIT_FRONTEND_ARCH_HYPERPARAMETER_H_
#define KVJIT_FRONTEND_ARCH_HYPERPARAMETER_H_

#include <optional>

#include "absl/strings/string_view.h"

namespace kvjit::arch {

// The hyper-parameters a decoder is read from. Each has one name in each file
// format (see Describe); a family states its defaults once, against these.
enum class Param {
  kHiddenSize,
  kIntermediateSize,
  kNumLayers,
  kNumHeads,
  kNumKvHeads,
  kHeadDim,
  kContextLength,
  kVocabSize,
  kRmsNormEps,
  kRopeTheta,
  // The base the local (sliding-window) layers rotate at, where they have their own.
  kLocalRopeTheta,
  kTieWordEmbeddings,
  // Positions a sliding window spans; 0: none.
  kSlidingWindow,
  // Every this-many-th layer is global, the others local; 0: no such pattern.
  kSlidingWindowPattern,
  // Layers from this index on slide (with use_sliding_window).
  kMaxWindowLayers,
  // Scores scaled by query_pre_attn_scalar^(-1/2).
  kQueryPreAttnScalar,
  // cap · tanh(x / cap) of the scaled scores and of the logits; 0: none.
  kAttentionSoftcap,
  kFinalLogitSoftcap,
};

// Where a hyper-parameter is read: the GGUF key after "<architecture>."
// and the config.json field; empty where that format does not store it.
struct HyperParameter {
  absl::string_view gguf_key;
  absl::string_view config_field;
  // The value where the file does not give one and the family states none;
  // nullopt: the file must give it (or it is derived from others).
  std::optional<double> fallback;
};

const HyperParameter& Describe(Param param);

}  // namespace kvjit::arch

#endif  // KVJIT_FRONTEND_ARCH_HYPERPARAMETER_H_
