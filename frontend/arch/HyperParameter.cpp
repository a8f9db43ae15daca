#include "frontend/arch/HyperParameter.h"

namespace kvjit::arch {

const HyperParameter& Describe(Param param) {
  // What llama.cpp's converter writes and what transformers' configs hold.
  static const HyperParameter kHiddenSize{"embedding_length", "hidden_size", std::nullopt};
  static const HyperParameter kIntermediateSize{"feed_forward_length", "intermediate_size",
                                                std::nullopt};
  static const HyperParameter kNumLayers{"block_count", "num_hidden_layers", std::nullopt};
  static const HyperParameter kNumHeads{"attention.head_count", "num_attention_heads",
                                        std::nullopt};
  // Defaults to the number of heads.
  static const HyperParameter kNumKvHeads{"attention.head_count_kv", "num_key_value_heads",
                                          std::nullopt};
  // Defaults to hidden size / heads.
  static const HyperParameter kHeadDim{"attention.key_length", "head_dim", std::nullopt};
  static const HyperParameter kContextLength{"context_length", "max_position_embeddings",
                                             std::nullopt};
  static const HyperParameter kVocabSize{"vocab_size", "vocab_size", std::nullopt};
  static const HyperParameter kRmsNormEps{"attention.layer_norm_rms_epsilon", "rms_norm_eps",
                                          std::nullopt};
  static const HyperParameter kRopeTheta{"rope.freq_base", "rope_theta", 10000.0};
  static const HyperParameter kLocalRopeTheta{"", "rope_local_base_freq", 10000.0};
  static const HyperParameter kTieWordEmbeddings{"", "tie_word_embeddings", 0.0};
  static const HyperParameter kSlidingWindow{"attention.sliding_window", "sliding_window", 0.0};
  // llama.cpp's attention.sliding_window_pattern is refused rather than read:
  // kvjit builds the pattern a family states.
  static const HyperParameter kSlidingWindowPattern{"", "sliding_window_pattern", 0.0};
  static const HyperParameter kMaxWindowLayers{"", "max_window_layers", std::nullopt};
  static const HyperParameter kQueryPreAttnScalar{"", "query_pre_attn_scalar", std::nullopt};
  static const HyperParameter kAttentionSoftcap{"attn_logit_softcapping",
                                                "attn_logit_softcapping", 0.0};
  static const HyperParameter kFinalLogitSoftcap{"final_logit_softcapping",
                                                 "final_logit_softcapping", 0.0};
  switch (param) {
    case Param::kHiddenSize: return kHiddenSize;
    case Param::kIntermediateSize: return kIntermediateSize;
    case Param::kNumLayers: return kNumLayers;
    case Param::kNumHeads: return kNumHeads;
    case Param::kNumKvHeads: return kNumKvHeads;
    case Param::kHeadDim: return kHeadDim;
    case Param::kContextLength: return kContextLength;
    case Param::kVocabSize: return kVocabSize;
    case Param::kRmsNormEps: return kRmsNormEps;
    case Param::kRopeTheta: return kRopeTheta;
    case Param::kLocalRopeTheta: return kLocalRopeTheta;
    case Param::kTieWordEmbeddings: return kTieWordEmbeddings;
    case Param::kSlidingWindow: return kSlidingWindow;
    case Param::kSlidingWindowPattern: return kSlidingWindowPattern;
    case Param::kMaxWindowLayers: return kMaxWindowLayers;
    case Param::kQueryPreAttnScalar: return kQueryPreAttnScalar;
    case Param::kAttentionSoftcap: return kAttentionSoftcap;
    case Param::kFinalLogitSoftcap: return kFinalLogitSoftcap;
  }
  return kHiddenSize;  // unreachable: the switch covers every Param
}

}  // namespace kvjit::arch
