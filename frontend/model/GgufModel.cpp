#include "frontend/model/GgufModel.h"

#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "runtime/core/StatusMacros.h"

namespace kvjit::model {
namespace {

// The GGUF keys of one architecture: "<arch>.<suffix>".
class ArchKeys {
 public:
  ArchKeys(const gguf::GgufFile& file, std::string architecture)
      : file_(file), architecture_(std::move(architecture)) {}

  std::string Key(absl::string_view suffix) const { return absl::StrCat(architecture_, ".", suffix); }
  bool Has(absl::string_view suffix) const { return file_.Has(Key(suffix)); }

  absl::StatusOr<int64_t> Int(absl::string_view suffix) const { return file_.GetInt(Key(suffix)); }
  absl::StatusOr<int64_t> IntOr(absl::string_view suffix, int64_t fallback) const {
    return Has(suffix) ? Int(suffix) : fallback;
  }
  absl::StatusOr<double> FloatOr(absl::string_view suffix, double fallback) const {
    return Has(suffix) ? file_.GetFloat(Key(suffix)) : fallback;
  }

 private:
  const gguf::GgufFile& file_;
  std::string architecture_;
};

// `tensor` as the rope's frequency factors: one f32 divisor of the angle per
// rotated pair, as llama.cpp's converter stores them.
absl::Status ReadFrequencyFactors(const gguf::GgufFile& file, const gguf::GgufTensor& tensor,
                                  ModelConfig& config) {
  const int64_t pairs = config.head_dim / 2;
  if (tensor.type != quant::StorageType::kF32 || tensor.dims.size() != 1 ||
      tensor.dims[0] != pairs) {
    return absl::InvalidArgumentError(absl::StrCat(
        file.path(), ": tensor '", tensor.name, "' must be f32 of ", pairs,
        " entries (head_dim / 2), one divisor per rotated pair"));
  }
  config.rope_freq_factors.resize(static_cast<size_t>(pairs));
  std::memcpy(config.rope_freq_factors.data(), tensor.data.data(), pairs * sizeof(float));
  return absl::OkStatus();
}

// Llama 3.1's rope scaling, as the rope_freqs tensor.
absl::Status ReadRopeFreqFactors(const gguf::GgufFile& file, ModelConfig& config) {
  const gguf::GgufTensor* tensor = file.FindTensor("rope_freqs.weight");
  return tensor == nullptr ? absl::OkStatus() : ReadFrequencyFactors(file, *tensor, config);
}

// Phi-3's LongRoPE as llama.cpp's converter stores it: per-pair divisors for
// contexts up to rope.scaling.original_context_length (rope_factors_short) and
// beyond it (rope_factors_long), and the cos/sin multiplier
// rope.scaling.attn_factor. llama.cpp picks the long factors when its context
// exceeds the original; kvjit compiles for the model's whole context, so it
// does where context_length does.
absl::Status ReadLongRope(const gguf::GgufFile& file, const ArchKeys& keys, ModelConfig& config) {
  const gguf::GgufTensor* long_factors = file.FindTensor("rope_factors_long.weight");
  const gguf::GgufTensor* short_factors = file.FindTensor("rope_factors_short.weight");
  if (long_factors == nullptr && short_factors == nullptr) return absl::OkStatus();
  if (long_factors == nullptr || short_factors == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        file.path(), ": tensor 'rope_factors_", long_factors == nullptr ? "long" : "short",
        ".weight' is missing beside its pair (LongRoPE needs both)"));
  }
  KVJIT_ASSIGN_OR_RETURN(int64_t original,
                         keys.IntOr("rope.scaling.original_context_length", config.context_length));
  KVJIT_RETURN_IF_ERROR(ReadFrequencyFactors(
      file, config.context_length > original ? *long_factors : *short_factors, config));
  KVJIT_ASSIGN_OR_RETURN(config.rope_attention_factor, keys.FloatOr("rope.scaling.attn_factor", 1.0));
  return absl::OkStatus();
}

// llama.cpp's key for a model whose every layer attends over a sliding
// window of that many positions (0: none). A per-layer pattern of windowed and full
// layers (its sliding_window_pattern) is refused rather than guessed at.
absl::Status ReadSlidingWindow(const gguf::GgufFile& file, const ArchKeys& keys,
                               ModelConfig& config) {
  if (keys.Has("attention.sliding_window_pattern")) {
    return absl::UnimplementedError(absl::StrCat(
        file.path(), ": general.architecture '", config.architecture, "' with ",
        keys.Key("attention.sliding_window_pattern"),
        ": kvjit builds a sliding window on every layer or none, not a per-layer pattern"));
  }
  if (!keys.Has("attention.sliding_window")) return absl::OkStatus();
  KVJIT_ASSIGN_OR_RETURN(const int64_t window, keys.Int("attention.sliding_window"));
  // llama.cpp's Phi-3 converter writes 0 for a checkpoint without a window,
  // and llama.cpp reads 0 as none.
  if (window == 0) return absl::OkStatus();
  config.layer_windows.assign(static_cast<size_t>(config.num_layers), window);
  return absl::OkStatus();
}

absl::Status ReadRopeScaling(const gguf::GgufFile& file, const ArchKeys& keys,
                             ModelConfig& config) {
  KVJIT_RETURN_IF_ERROR(ReadRopeFreqFactors(file, config));
  KVJIT_RETURN_IF_ERROR(ReadLongRope(file, keys, config));
  if (!keys.Has("rope.scaling.type")) return absl::OkStatus();
  absl::StatusOr<absl::string_view> type = file.GetString(keys.Key("rope.scaling.type"));
  if (!type.ok()) return type.status();
  if (*type == "none") return absl::OkStatus();
  if (*type != "linear") {
    return absl::UnimplementedError(absl::StrCat(file.path(), ": ", keys.Key("rope.scaling.type"),
                                                 " '", *type, "' is not supported (only linear)"));
  }
  config.rope_scaling.kind = RopeScalingKind::kLinear;
  KVJIT_ASSIGN_OR_RETURN(config.rope_scaling.factor, file.GetFloat(keys.Key("rope.scaling.factor")));
  return absl::OkStatus();
}

// What Gemma 2 and Gemma 3 share as llama.cpp runs them (its converter has
// already added Gemma's 1 to every norm weight): embeddings scaled by
// sqrt(hidden), norms after attention and after the FFN, gelu_tanh(gate) ·
// up, scores scaled by 1 / sqrt(key_length) (llama.cpp's rule, with the
// 27B model's hidden / heads; llama.cpp knows that model by its layer
// count), and `global_layer_period` - 1 local layers (the sliding window) to
// every global one.
void ReadGemma(int64_t layers_of_27b, int64_t global_layer_period, ModelConfig& config) {
  config.embedding_scale = std::sqrt(static_cast<double>(config.hidden_size));
  config.post_norms = true;
  config.gelu_ffn = true;
  const double query_pre_attn_scalar =
      config.num_layers == layers_of_27b
          ? static_cast<double>(config.hidden_size / config.num_heads)
          : static_cast<double>(config.head_dim);
  config.attention_scale = 1.0 / std::sqrt(query_pre_attn_scalar);
  config.global_layer_period = global_layer_period;
  // <arch>.attention.sliding_window is the local layers' window alone.
  for (size_t layer = 0; layer < config.layer_windows.size(); ++layer) {
    if (!config.IsLocalLayer(static_cast<int64_t>(layer))) config.layer_windows[layer] = 0;
  }
}

// Gemma 3: five local layers (rope base 10000, unscaled) to every global one.
void ReadGemma3(ModelConfig& config) {
  constexpr int64_t kGemma3_27bLayers = 62;
  ReadGemma(kGemma3_27bLayers, 6, config);
  config.local_rope_theta = 10000.0;
}

// Gemma 2: even layers local and odd ones global at one rope base; without
// gemma2.attention.sliding_window llama.cpp's window of 4096, without the
// soft-capping keys its caps of 50 (attention) and 30 (final logits).
absl::Status ReadGemma2(const ArchKeys& keys, ModelConfig& config) {
  if (config.layer_windows.empty()) {
    constexpr int64_t kGemma2Window = 4096;
    config.layer_windows.assign(static_cast<size_t>(config.num_layers), kGemma2Window);
  }
  constexpr int64_t kGemma2_27bLayers = 46;
  ReadGemma(kGemma2_27bLayers, 2, config);
  config.local_rope_theta = config.rope_theta;
  KVJIT_ASSIGN_OR_RETURN(config.attention_softcap, keys.FloatOr("attn_logit_softcapping", 50.0));
  KVJIT_ASSIGN_OR_RETURN(config.final_logit_softcap, keys.FloatOr("final_logit_softcapping", 30.0));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ModelConfig> ModelConfigFromGguf(const gguf::GgufFile& file) {
  ModelConfig config;
  KVJIT_ASSIGN_OR_RETURN(absl::string_view architecture, file.GetString("general.architecture"));
  config.architecture = std::string(architecture);
  if (config.architecture != "llama" && config.architecture != "qwen2" &&
      config.architecture != "qwen3" && config.architecture != "phi3" &&
      config.architecture != "gemma2" && config.architecture != "gemma3") {
    return absl::UnimplementedError(absl::StrCat(
        file.path(), ": general.architecture '", config.architecture,
        "' is not supported (llama, qwen2, qwen3, phi3, gemma2, gemma3)"));
  }
  if (file.Has("general.name")) {
    KVJIT_ASSIGN_OR_RETURN(absl::string_view name, file.GetString("general.name"));
    config.name = std::string(name);
  }
  const ArchKeys keys(file, config.architecture);
  KVJIT_ASSIGN_OR_RETURN(config.hidden_size, keys.Int("embedding_length"));
  KVJIT_ASSIGN_OR_RETURN(config.intermediate_size, keys.Int("feed_forward_length"));
  KVJIT_ASSIGN_OR_RETURN(config.num_layers, keys.Int("block_count"));
  KVJIT_ASSIGN_OR_RETURN(config.num_heads, keys.Int("attention.head_count"));
  KVJIT_ASSIGN_OR_RETURN(config.num_kv_heads, keys.IntOr("attention.head_count_kv", config.num_heads));
  KVJIT_ASSIGN_OR_RETURN(config.context_length, keys.Int("context_length"));
  KVJIT_ASSIGN_OR_RETURN(config.rms_norm_eps, file.GetFloat(keys.Key("attention.layer_norm_rms_epsilon")));
  KVJIT_ASSIGN_OR_RETURN(config.rope_theta, keys.FloatOr("rope.freq_base", 10000.0));
  if (config.num_heads <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(file.path(), ": ", keys.Key("attention.head_count"),
                                                   " must be positive"));
  }
  KVJIT_ASSIGN_OR_RETURN(config.head_dim,
                         keys.IntOr("attention.key_length", config.hidden_size / config.num_heads));
  KVJIT_ASSIGN_OR_RETURN(int64_t rotary_dim, keys.IntOr("rope.dimension_count", config.head_dim));
  if (rotary_dim != config.head_dim) {
    return absl::UnimplementedError(absl::StrCat(
        file.path(), ": ", keys.Key("rope.dimension_count"), " = ", rotary_dim,
        " differs from the head dimension ", config.head_dim, " (partial rotary is not supported)"));
  }
  KVJIT_RETURN_IF_ERROR(ReadRopeScaling(file, keys, config));
  KVJIT_RETURN_IF_ERROR(ReadSlidingWindow(file, keys, config));

  // llama.cpp's converter permutes Q and K rows of llama checkpoints into
  // interleaved pairs; Qwen checkpoints keep Hugging Face's rotate-half order.
  config.rope_style = config.architecture == "llama" ? RopeStyle::kInterleaved : RopeStyle::kNeox;
  config.qkv_bias = file.FindTensor("blk.0.attn_q.bias") != nullptr;
  config.qk_norm = config.architecture == "qwen3" || config.architecture == "gemma3";
  config.fused_projections = config.architecture == "phi3";
  if (config.architecture == "gemma3") ReadGemma3(config);
  if (config.architecture == "gemma2") KVJIT_RETURN_IF_ERROR(ReadGemma2(keys, config));
  config.tied_embeddings = file.FindTensor("output.weight") == nullptr;

  KVJIT_ASSIGN_OR_RETURN(const gguf::GgufTensor* embedding, file.GetTensor("token_embd.weight"));
  if (embedding->dims.size() != 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        file.path(), ": tensor 'token_embd.weight' must have 2 dimensions, has ",
        embedding->dims.size()));
  }
  config.vocab_size = embedding->dims[1];
  if (keys.Has("vocab_size")) {
    KVJIT_ASSIGN_OR_RETURN(int64_t declared, keys.Int("vocab_size"));
    if (declared != config.vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat(
          file.path(), ": ", keys.Key("vocab_size"), " = ", declared,
          " but tensor 'token_embd.weight' has ", config.vocab_size, " rows"));
    }
  }
  KVJIT_RETURN_IF_ERROR(config.Validate(file.path()));
  return config;
}

GgufWeightSource::GgufWeightSource(const gguf::GgufFile& file) : file_(file) {
  weights_.reserve(file.tensors().size());
  for (const gguf::GgufTensor& tensor : file.tensors()) {
    WeightInfo weight;
    weight.name = tensor.name;
    weight.shape.assign(tensor.dims.rbegin(), tensor.dims.rend());
    weight.storage = tensor.type;
    weight.size_bytes = tensor.size_bytes;
    weights_.push_back(std::move(weight));
  }
}

absl::Span<const uint8_t> GgufWeightSource::Bytes(const WeightInfo& weight) const {
  const gguf::GgufTensor* tensor = file_.FindTensor(weight.name);
  return tensor ? tensor->data : absl::Span<const uint8_t>();
}

}  // namespace kvjit::model
