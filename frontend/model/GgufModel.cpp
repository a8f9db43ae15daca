#include "frontend/model/GgufModel.h"

#include <cmath>
#include <cstring>
#include <memory>
#include <optional>

#include "absl/functional/function_ref.h"
#include "absl/strings/str_cat.h"
#include "frontend/arch/ArchRegistry.h"
#include "runtime/core/StatusMacros.h"

namespace kvjit::model {
namespace {

using FindTensorFn = absl::FunctionRef<const gguf::GgufTensor*(absl::string_view)>;

using arch::Param;

// The GGUF keys of one architecture: "<arch>.<suffix>".
class ArchKeys {
 public:
  ArchKeys(const gguf::GgufFile& file, std::string architecture, const arch::Family& family)
      : file_(file), architecture_(std::move(architecture)), family_(family) {}

  std::string Key(absl::string_view suffix) const { return absl::StrCat(architecture_, ".", suffix); }
  bool Has(absl::string_view suffix) const { return file_.Has(Key(suffix)); }

  absl::StatusOr<int64_t> Int(absl::string_view suffix) const { return file_.GetInt(Key(suffix)); }
  absl::StatusOr<int64_t> IntOr(absl::string_view suffix, int64_t fallback) const {
    return Has(suffix) ? Int(suffix) : fallback;
  }
  absl::StatusOr<double> FloatOr(absl::string_view suffix, double fallback) const {
    return Has(suffix) ? file_.GetFloat(Key(suffix)) : fallback;
  }

  // The key of `param`, and the family's default where the file lacks it.
  std::string Key(Param param) const { return Key(arch::Describe(param).gguf_key); }
  std::optional<double> Default(Param param) const {
    return family_.DefaultOf(param, arch::Format::kGguf);
  }
  // `param`, or its default (`fallback` where it has none); an error naming
  // the key where it is absent with neither. A hyper-parameter GGUF does not
  // store is its default.
  absl::StatusOr<int64_t> Int(Param param, std::optional<int64_t> fallback = std::nullopt) const {
    const absl::string_view suffix = arch::Describe(param).gguf_key;
    if (const std::optional<double> stated = Default(param)) {
      fallback = static_cast<int64_t>(*stated);
    }
    if (suffix.empty()) return NotStored(param, fallback);
    return fallback ? IntOr(suffix, *fallback) : Int(suffix);
  }
  absl::StatusOr<double> Float(Param param) const {
    const absl::string_view suffix = arch::Describe(param).gguf_key;
    const std::optional<double> fallback = Default(param);
    if (suffix.empty()) return NotStored(param, fallback);
    return fallback ? FloatOr(suffix, *fallback) : file_.GetFloat(Key(suffix));
  }

 private:
  template <typename T>
  absl::StatusOr<T> NotStored(Param param, std::optional<T> fallback) const {
    if (fallback) return *fallback;
    return absl::InternalError(absl::StrCat(
        file_.path(), ": GGUF stores no ", arch::Describe(param).config_field,
        " and the family states no default for it"));
  }

  const gguf::GgufFile& file_;
  std::string architecture_;
  const arch::Family& family_;
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

// llama3 rope scaling, as llama.cpp's converter stores it: the rope_freqs tensor.
absl::Status ReadRopeFreqFactors(const gguf::GgufFile& file, FindTensorFn find,
                                 ModelConfig& config) {
  const gguf::GgufTensor* tensor = find("rope_freqs.weight");
  return tensor == nullptr ? absl::OkStatus() : ReadFrequencyFactors(file, *tensor, config);
}

// LongRoPE as llama.cpp's converter stores it: per-pair divisors for
// contexts up to rope.scaling.original_context_length (rope_factors_short) and
// beyond it (rope_factors_long), and the cos/sin multiplier
// rope.scaling.attn_factor. llama.cpp picks the long factors when its context
// exceeds the original; kvjit compiles for the model's whole context, so it
// does where context_length does.
absl::Status ReadLongRope(const gguf::GgufFile& file, FindTensorFn find, const ArchKeys& keys,
                          ModelConfig& config) {
  const gguf::GgufTensor* long_factors = find("rope_factors_long.weight");
  const gguf::GgufTensor* short_factors = find("rope_factors_short.weight");
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
// window of that many positions (0 or absent: the family's default, none
// where it has none). A per-layer pattern of windowed and full layers (its
// sliding_window_pattern) is refused rather than guessed at.
absl::Status ReadSlidingWindow(const gguf::GgufFile& file, const ArchKeys& keys,
                               ModelConfig& config) {
  if (keys.Has("attention.sliding_window_pattern")) {
    return absl::UnimplementedError(absl::StrCat(
        file.path(), ": general.architecture '", config.architecture, "' with ",
        keys.Key("attention.sliding_window_pattern"),
        ": kvjit builds a sliding window on every layer or none, not a per-layer pattern"));
  }
  KVJIT_ASSIGN_OR_RETURN(int64_t window, keys.Int(Param::kSlidingWindow));
  // llama.cpp's converter writes 0 for a checkpoint without a window, and
  // llama.cpp reads 0 as none.
  if (window == 0) window = static_cast<int64_t>(keys.Default(Param::kSlidingWindow).value_or(0));
  if (window == 0) return absl::OkStatus();
  config.layer_windows.assign(static_cast<size_t>(config.num_layers), window);
  return absl::OkStatus();
}

absl::Status ReadRopeScaling(const gguf::GgufFile& file, FindTensorFn find, const ArchKeys& keys,
                             ModelConfig& config) {
  KVJIT_RETURN_IF_ERROR(ReadRopeFreqFactors(file, find, config));
  KVJIT_RETURN_IF_ERROR(ReadLongRope(file, find, keys, config));
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

// The family's departures from the common layer, as llama.cpp runs them (its
// converter has already added any 1 that a checkpoint's norm weights leave
// to the model).
absl::Status ReadLayer(const arch::Family& family, const ArchKeys& keys, ModelConfig& config) {
  const arch::Layer& layer = family.layer;
  // llama.cpp's converter permutes Q and K rows into interleaved pairs for
  // some families and keeps Hugging Face's rotate-half order for the others.
  config.rope_style = layer.gguf_interleaved_rope ? RopeStyle::kInterleaved : RopeStyle::kNeox;
  config.qk_norm = layer.qk_norm;
  config.fused_projections = layer.fused_projections;
  config.post_norms = layer.post_norms;
  config.gelu_ffn = layer.activation == arch::Activation::kGeluTanh;
  if (layer.embedding_scaled) {
    config.embedding_scale = std::sqrt(static_cast<double>(config.hidden_size));
  }
  // Scores scaled by 1 / sqrt(key_length), llama.cpp's rule, except for the
  // model it knows by its layer count, whose scalar is hidden / heads.
  if (layer.query_pre_attn_scalar) {
    const double query_pre_attn_scalar =
        config.num_layers == layer.gguf_query_scalar_is_hidden_per_head_at
            ? static_cast<double>(config.hidden_size / config.num_heads)
            : static_cast<double>(config.head_dim);
    config.attention_scale = 1.0 / std::sqrt(query_pre_attn_scalar);
  }
  if (layer.windows == arch::Windows::kLocalAndGlobal) {
    KVJIT_ASSIGN_OR_RETURN(config.global_layer_period, keys.Int(Param::kSlidingWindowPattern));
    config.local_rope_theta = layer.local_rope == arch::LocalRope::kOwnBase
                                  ? *keys.Default(Param::kLocalRopeTheta)
                                  : config.rope_theta;
    // <arch>.attention.sliding_window is the local layers' window alone.
    for (size_t index = 0; index < config.layer_windows.size(); ++index) {
      if (!config.IsLocalLayer(static_cast<int64_t>(index))) config.layer_windows[index] = 0;
    }
  }
  KVJIT_ASSIGN_OR_RETURN(config.attention_softcap, keys.Float(Param::kAttentionSoftcap));
  KVJIT_ASSIGN_OR_RETURN(config.final_logit_softcap, keys.Float(Param::kFinalLogitSoftcap));
  return absl::OkStatus();
}

// `file`'s metadata and the model's tensors, found by `find` (in `file`, or
// in any part of a split).
absl::StatusOr<ModelConfig> ConfigFromGguf(const gguf::GgufFile& file, FindTensorFn find) {
  ModelConfig config;
  KVJIT_ASSIGN_OR_RETURN(absl::string_view architecture, file.GetString("general.architecture"));
  KVJIT_ASSIGN_OR_RETURN(const arch::Family* family,
                         arch::FamilyOfGgufArchitecture(architecture, file.path()));
  config.architecture = std::string(architecture);
  if (file.Has("general.name")) {
    KVJIT_ASSIGN_OR_RETURN(absl::string_view name, file.GetString("general.name"));
    config.name = std::string(name);
  }
  const ArchKeys keys(file, config.architecture, *family);
  KVJIT_ASSIGN_OR_RETURN(config.hidden_size, keys.Int(Param::kHiddenSize));
  KVJIT_ASSIGN_OR_RETURN(config.intermediate_size, keys.Int(Param::kIntermediateSize));
  KVJIT_ASSIGN_OR_RETURN(config.num_layers, keys.Int(Param::kNumLayers));
  KVJIT_ASSIGN_OR_RETURN(config.num_heads, keys.Int(Param::kNumHeads));
  KVJIT_ASSIGN_OR_RETURN(config.num_kv_heads, keys.Int(Param::kNumKvHeads, config.num_heads));
  KVJIT_ASSIGN_OR_RETURN(config.context_length, keys.Int(Param::kContextLength));
  KVJIT_ASSIGN_OR_RETURN(config.rms_norm_eps, keys.Float(Param::kRmsNormEps));
  KVJIT_ASSIGN_OR_RETURN(config.rope_theta, keys.Float(Param::kRopeTheta));
  if (config.num_heads <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(file.path(), ": ", keys.Key(Param::kNumHeads),
                                                   " must be positive"));
  }
  KVJIT_ASSIGN_OR_RETURN(config.head_dim,
                         keys.Int(Param::kHeadDim, config.hidden_size / config.num_heads));
  KVJIT_ASSIGN_OR_RETURN(int64_t rotary_dim, keys.IntOr("rope.dimension_count", config.head_dim));
  if (rotary_dim != config.head_dim) {
    return absl::UnimplementedError(absl::StrCat(
        file.path(), ": ", keys.Key("rope.dimension_count"), " = ", rotary_dim,
        " differs from the head dimension ", config.head_dim, " (partial rotary is not supported)"));
  }
  KVJIT_RETURN_IF_ERROR(ReadRopeScaling(file, find, keys, config));
  KVJIT_RETURN_IF_ERROR(ReadSlidingWindow(file, keys, config));
  config.qkv_bias = find("blk.0.attn_q.bias") != nullptr;
  KVJIT_RETURN_IF_ERROR(ReadLayer(*family, keys, config));
  config.tied_embeddings = find("output.weight") == nullptr;

  const gguf::GgufTensor* embedding = find("token_embd.weight");
  if (embedding == nullptr) {
    return absl::NotFoundError(absl::StrCat(file.path(), ": tensor 'token_embd.weight' is missing"));
  }
  if (embedding->dims.size() != 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        file.path(), ": tensor 'token_embd.weight' must have 2 dimensions, has ",
        embedding->dims.size()));
  }
  config.vocab_size = embedding->dims[1];
  const absl::string_view vocab_key = arch::Describe(Param::kVocabSize).gguf_key;
  if (keys.Has(vocab_key)) {
    KVJIT_ASSIGN_OR_RETURN(int64_t declared, keys.Int(vocab_key));
    if (declared != config.vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat(
          file.path(), ": ", keys.Key(vocab_key), " = ", declared,
          " but tensor 'token_embd.weight' has ", config.vocab_size, " rows"));
    }
  }
  KVJIT_RETURN_IF_ERROR(config.Validate(file.path()));
  return config;
}

}  // namespace

absl::StatusOr<ModelConfig> ModelConfigFromGguf(const gguf::GgufFile& file) {
  return ConfigFromGguf(file, [&file](absl::string_view name) { return file.FindTensor(name); });
}

absl::StatusOr<ModelConfig> ModelConfigFromGguf(const gguf::GgufModelFiles& files) {
  return ConfigFromGguf(files.metadata(), [&files](absl::string_view name) {
    std::optional<gguf::GgufModelFiles::Located> located = files.FindTensor(name);
    return located ? located->tensor : nullptr;
  });
}

GgufWeightSource::GgufWeightSource(const gguf::GgufModelFiles& files) : files_(files) {
  for (const std::unique_ptr<gguf::GgufFile>& part : files.parts()) {
    for (const gguf::GgufTensor& tensor : part->tensors()) {
      WeightInfo weight;
      weight.name = tensor.name;
      weight.shape.assign(tensor.dims.rbegin(), tensor.dims.rend());
      weight.storage = tensor.type;
      weight.size_bytes = tensor.size_bytes;
      weights_.push_back(std::move(weight));
    }
  }
}

absl::Span<const uint8_t> GgufWeightSource::Bytes(const WeightInfo& weight) const {
  std::optional<gguf::GgufModelFiles::Located> located = files_.FindTensor(weight.name);
  return located ? located->tensor->data : absl::Span<const uint8_t>();
}

}  // namespace kvjit::model
