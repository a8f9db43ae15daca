#include "frontend/huggingface/HfConfig.h"

#include <algorithm>
#include <filesystem>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "frontend/arch/ArchRegistry.h"
#include "frontend/huggingface/JsonFile.h"

namespace kvjit::hf {
namespace {

// Typed reads of one JSON object's fields. The first error is kept and every
// later read returns its default, so a parse reads all fields and checks
// status() once.
class FieldReader {
 public:
  FieldReader(const nlohmann::json& object, std::string prefix)
      : object_(object), prefix_(std::move(prefix)) {}

  const absl::Status& status() const { return status_; }
  std::string Where(absl::string_view key) const { return absl::StrCat(prefix_, key); }

  // Whether the key is there, null or not.
  bool Has(absl::string_view key) const { return FindField(object_, key) != nullptr; }

  // nullptr where the key is absent or null.
  const nlohmann::json* Find(absl::string_view key) const {
    const nlohmann::json* value = FindField(object_, key);
    return value == nullptr || value->is_null() ? nullptr : value;
  }

  int64_t PositiveInteger(absl::string_view key, std::optional<int64_t> fallback = std::nullopt) {
    const nlohmann::json* value = Find(key);
    if (value == nullptr) return Missing(key, fallback).value_or(0);
    absl::StatusOr<int64_t> parsed = NonNegativeInteger(*value, Where(key));
    if (parsed.ok() && *parsed == 0) {
      parsed = absl::InvalidArgumentError(absl::StrCat(Where(key), " must be positive"));
    }
    if (!parsed.ok()) {
      Fail(parsed.status());
      return 0;
    }
    return *parsed;
  }

  double PositiveNumber(absl::string_view key, std::optional<double> fallback = std::nullopt) {
    const nlohmann::json* value = Find(key);
    if (value == nullptr) return Missing(key, fallback).value_or(0.0);
    if (!value->is_number() || !(value->get<double>() > 0.0)) {
      Fail(absl::InvalidArgumentError(
          absl::StrCat(Where(key), " must be a positive number, got ", Describe(*value))));
      return 0.0;
    }
    return value->get<double>();
  }

  bool Bool(absl::string_view key, bool fallback) {
    const nlohmann::json* value = Find(key);
    if (value == nullptr) return fallback;
    if (!value->is_boolean()) {
      Fail(absl::InvalidArgumentError(
          absl::StrCat(Where(key), " must be true or false, got ", Describe(*value))));
      return fallback;
    }
    return value->get<bool>();
  }

  std::string String(absl::string_view key, std::string fallback) {
    const nlohmann::json* value = Find(key);
    if (value == nullptr) return fallback;
    if (!value->is_string()) {
      Fail(absl::InvalidArgumentError(
          absl::StrCat(Where(key), " must be a string, got ", Describe(*value))));
      return fallback;
    }
    return value->get<std::string>();
  }

  // A list of positive numbers; empty (and an error) where absent.
  std::vector<double> PositiveNumbers(absl::string_view key) {
    const nlohmann::json* value = Find(key);
    std::vector<double> numbers;
    if (value == nullptr || !value->is_array()) {
      Fail(absl::InvalidArgumentError(absl::StrCat(Where(key), " must be a list of numbers")));
      return numbers;
    }
    for (const nlohmann::json& entry : *value) {
      if (!entry.is_number() || !(entry.get<double>() > 0.0)) {
        Fail(absl::InvalidArgumentError(
            absl::StrCat(Where(key), " must hold positive numbers, got ", Describe(entry))));
        return {};
      }
      numbers.push_back(entry.get<double>());
    }
    return numbers;
  }

  // An integer or a list of integers; empty where absent.
  std::vector<int64_t> TokenIds(absl::string_view key) {
    const nlohmann::json* value = Find(key);
    if (value == nullptr) return {};
    std::vector<int64_t> ids;
    for (const nlohmann::json& id : value->is_array() ? *value : nlohmann::json::array({*value})) {
      absl::StatusOr<int64_t> parsed = NonNegativeInteger(id, Where(key));
      if (!parsed.ok()) {
        Fail(parsed.status());
        return {};
      }
      ids.push_back(*parsed);
    }
    return ids;
  }

  // Records `error` unless an earlier one is kept.
  void Fail(absl::Status error) {
    if (status_.ok()) status_ = std::move(error);
  }

 private:
  template <typename T>
  std::optional<T> Missing(absl::string_view key, std::optional<T> fallback) {
    if (!fallback) Fail(absl::InvalidArgumentError(absl::StrCat(Where(key), " is missing")));
    return fallback;
  }

  const nlohmann::json& object_;
  std::string prefix_;
  absl::Status status_;
};

// The first entry of "architectures", or empty.
absl::StatusOr<std::string> ReadArchitecture(FieldReader& reader) {
  const nlohmann::json* architectures = reader.Find("architectures");
  if (architectures == nullptr) return std::string();
  bool all_strings = architectures->is_array() &&
                     std::all_of(architectures->begin(), architectures->end(),
                                 [](const nlohmann::json& entry) { return entry.is_string(); });
  if (!all_strings) {
    return absl::InvalidArgumentError(
        absl::StrCat(reader.Where("architectures"), " must be a list of strings"));
  }
  return architectures->empty() ? std::string() : (*architectures)[0].get<std::string>();
}

// The family model_type names, or where it is absent (older configs) the
// family of the architectures entry.
absl::StatusOr<const arch::Family*> ReadFamily(FieldReader& reader, std::string& architecture) {
  absl::StatusOr<std::string> named = ReadArchitecture(reader);
  if (!named.ok()) return named.status();
  architecture = *named;
  std::string model_type = reader.String("model_type", "");
  if (!reader.status().ok()) return reader.status();
  if (!model_type.empty()) {
    return arch::FamilyOfConfigModelType(model_type, reader.Where("model_type"));
  }
  if (const arch::Family* family = arch::FindConfigArchitecture(architecture)) return family;
  return absl::InvalidArgumentError(absl::StrCat(
      reader.Where("model_type"), " is missing and architectures names no known model"));
}

// The config.json field of `param`.
std::string Field(arch::Param param) { return std::string(arch::Describe(param).config_field); }

std::optional<double> NumberDefault(const arch::Family& family, arch::Param param) {
  return family.DefaultOf(param, arch::Format::kConfigJson);
}

std::optional<int64_t> IntegerDefault(const arch::Family& family, arch::Param param) {
  const std::optional<double> value = NumberDefault(family, param);
  return value ? std::optional<int64_t>(static_cast<int64_t>(*value)) : std::nullopt;
}

RopeScaling ReadRopeScaling(const nlohmann::json& object, FieldReader& outer,
                            absl::string_view key, std::optional<LongRope>& long_rope) {
  FieldReader reader(object, absl::StrCat(outer.Where(key), "."));
  // transformers writes "rope_type"; older configs wrote "type".
  std::string type = reader.String("rope_type", reader.String("type", "default"));
  RopeScaling scaling;
  if (type == "default") {
    // No scaling: newer configs spell it out.
  } else if (type == "linear") {
    scaling.kind = RopeScalingKind::kLinear;
    scaling.factor = reader.PositiveNumber("factor");
  } else if (type == "llama3") {
    scaling.kind = RopeScalingKind::kLlama3;
    scaling.factor = reader.PositiveNumber("factor");
    scaling.low_freq_factor = reader.PositiveNumber("low_freq_factor");
    scaling.high_freq_factor = reader.PositiveNumber("high_freq_factor");
    scaling.original_context = reader.PositiveInteger("original_max_position_embeddings");
    if (reader.status().ok() && !(scaling.high_freq_factor > scaling.low_freq_factor)) {
      reader.Fail(absl::InvalidArgumentError(
          absl::StrCat(reader.Where("high_freq_factor"), " must exceed low_freq_factor")));
    }
  } else if (type == "longrope" || type == "su") {
    LongRope& longrope = long_rope.emplace();
    longrope.short_factor = reader.PositiveNumbers("short_factor");
    longrope.long_factor = reader.PositiveNumbers("long_factor");
    if (reader.Find("attention_factor") != nullptr) {
      longrope.attention_factor = reader.PositiveNumber("attention_factor");
    }
    // Older configs keep it at the top level; newer ones inside rope_scaling.
    longrope.original_max_position_embeddings = reader.PositiveInteger(
        "original_max_position_embeddings",
        outer.Find("original_max_position_embeddings") != nullptr
            ? std::optional<int64_t>(outer.PositiveInteger("original_max_position_embeddings"))
            : std::nullopt);
  } else {
    reader.Fail(absl::UnimplementedError(absl::StrCat(
        outer.Where(key), " type '", type, "' is not supported (linear, llama3, longrope are)")));
  }
  if (!reader.status().ok()) outer.Fail(reader.status());
  return scaling;
}

// The sliding layers' own rope base, unscaled: rope_local_base_freq, or
// transformers 5's rope_parameters.sliding_attention.
void ReadLocalRope(FieldReader& reader, const nlohmann::json* sliding, const arch::Family& family,
                   DecoderConfig& config) {
  const double default_theta = *NumberDefault(family, arch::Param::kLocalRopeTheta);
  double theta_in_parameters = default_theta;
  if (sliding != nullptr) {
    const std::string where = absl::StrCat(reader.Where("rope_parameters"), ".sliding_attention");
    if (!sliding->is_object()) {
      reader.Fail(absl::InvalidArgumentError(absl::StrCat(where, " must be an object")));
      return;
    }
    FieldReader sliding_reader(*sliding, absl::StrCat(where, "."));
    theta_in_parameters = sliding_reader.PositiveNumber("rope_theta", default_theta);
    const std::string type = sliding_reader.String("rope_type", "default");
    if (sliding_reader.status().ok() && type != "default") {
      sliding_reader.Fail(absl::UnimplementedError(absl::StrCat(
          where, ".rope_type '", type, "' is not supported (the sliding layers rotate unscaled)")));
    }
    if (!sliding_reader.status().ok()) reader.Fail(sliding_reader.status());
  }
  config.local_rope_theta =
      reader.PositiveNumber(Field(arch::Param::kLocalRopeTheta), theta_in_parameters);
}

// Rope settings sit at the top level, or (transformers 5) in rope_parameters,
// which for a family of local and global layers holds one object per layer
// kind (full_attention, sliding_attention).
void ReadRope(FieldReader& reader, const arch::Family& family, DecoderConfig& config) {
  const nlohmann::json* parameters = reader.Find("rope_parameters");
  if (parameters != nullptr && !parameters->is_object()) {
    reader.Fail(absl::InvalidArgumentError(
        absl::StrCat(reader.Where("rope_parameters"), " must be an object")));
    return;
  }
  std::string parameters_key = "rope_parameters";
  const nlohmann::json* sliding = nullptr;
  if (parameters != nullptr && FindField(*parameters, "full_attention") != nullptr) {
    sliding = FindField(*parameters, "sliding_attention");
    parameters = FindField(*parameters, "full_attention");
    parameters_key = "rope_parameters.full_attention";
    if (!parameters->is_object()) {
      reader.Fail(absl::InvalidArgumentError(
          absl::StrCat(reader.Where(parameters_key), " must be an object")));
      return;
    }
  }
  const bool has_local_layers = family.layer.windows == arch::Windows::kLocalAndGlobal;
  const bool local_base_of_its_own = family.layer.local_rope == arch::LocalRope::kOwnBase;
  if ((has_local_layers && local_base_of_its_own) || sliding != nullptr) {
    ReadLocalRope(reader, sliding, family, config);
  }
  const double default_theta = *NumberDefault(family, arch::Param::kRopeTheta);
  double theta_in_parameters = default_theta;
  if (parameters != nullptr) {
    FieldReader parameters_reader(*parameters, absl::StrCat(reader.Where(parameters_key), "."));
    theta_in_parameters = parameters_reader.PositiveNumber("rope_theta", default_theta);
    if (!parameters_reader.status().ok()) reader.Fail(parameters_reader.status());
  }
  config.rope_theta = reader.PositiveNumber(Field(arch::Param::kRopeTheta), theta_in_parameters);
  // Without a rope of their own, the sliding layers rotate as the global ones.
  if (has_local_layers && !local_base_of_its_own && sliding == nullptr) {
    config.local_rope_theta = config.rope_theta;
  }
  // The other families build every layer with one rope: a sliding layer
  // rope that differs would be silently dropped.
  if (!has_local_layers && sliding != nullptr && reader.status().ok() &&
      config.local_rope_theta != config.rope_theta) {
    reader.Fail(absl::UnimplementedError(absl::StrCat(
        reader.Where("rope_parameters"), ".sliding_attention.rope_theta ", config.local_rope_theta,
        " differs from full_attention's ", config.rope_theta,
        "; kvjit rotates every layer of this family at one base")));
  }

  if (const nlohmann::json* scaling = reader.Find("rope_scaling")) {
    if (!scaling->is_object()) {
      reader.Fail(absl::InvalidArgumentError(
          absl::StrCat(reader.Where("rope_scaling"), " must be null or an object")));
      return;
    }
    config.rope_scaling = ReadRopeScaling(*scaling, reader, "rope_scaling", config.long_rope);
  } else if (parameters != nullptr) {
    config.rope_scaling = ReadRopeScaling(*parameters, reader, parameters_key, config.long_rope);
  }
}

std::optional<quant::StorageType> ReadTorchDtype(FieldReader& reader) {
  absl::string_view key = reader.Find("torch_dtype") != nullptr ? "torch_dtype" : "dtype";
  std::string dtype = reader.String(key, "");
  if (dtype.empty()) return std::nullopt;
  if (dtype == "float32") return quant::StorageType::kF32;
  if (dtype == "float16") return quant::StorageType::kF16;
  if (dtype == "bfloat16") return quant::StorageType::kBF16;
  reader.Fail(absl::UnimplementedError(absl::StrCat(
      reader.Where(key), " '", dtype, "' is not supported (float32, float16, bfloat16 are)")));
  return std::nullopt;
}

// Which layers attend over a sliding window (see DecoderConfig).
void ReadSlidingWindows(FieldReader& reader, const arch::Family& family, DecoderConfig& config) {
  bool applies = false;
  switch (family.layer.windows) {
    case arch::Windows::kGgufOnly:
      return;
    case arch::Windows::kEveryLayer:
    case arch::Windows::kLocalAndGlobal:
      applies = true;
      break;
    case arch::Windows::kFromMaxWindowLayers:
      applies = reader.Bool("use_sliding_window", false);
      break;
  }
  const bool local_and_global = family.layer.windows == arch::Windows::kLocalAndGlobal;
  const std::string window_field = Field(arch::Param::kSlidingWindow);
  // A window the file does not give is the family's default where it has
  // local layers; elsewhere there is none.
  if (!applies || (!local_and_global && reader.Find(window_field) == nullptr)) return;
  const int64_t window = reader.PositiveInteger(
      window_field, IntegerDefault(family, arch::Param::kSlidingWindow));
  if (!reader.status().ok()) return;
  const int64_t layers = config.num_hidden_layers;
  if (const nlohmann::json* layer_types = reader.Find("layer_types")) {
    if (!layer_types->is_array() || static_cast<int64_t>(layer_types->size()) != layers) {
      reader.Fail(absl::InvalidArgumentError(absl::StrCat(
          reader.Where("layer_types"), " must list one kind for each of the ", layers, " layers")));
      return;
    }
    for (const nlohmann::json& kind : *layer_types) {
      const std::string name = kind.is_string() ? kind.get<std::string>() : kind.dump();
      if (name != "sliding_attention" && name != "full_attention") {
        reader.Fail(absl::UnimplementedError(absl::StrCat(
            config.architecture.empty() ? "this model" : config.architecture, ": ",
            reader.Where("layer_types"), " names the layer kind '", name,
            "', which kvjit does not build (sliding_attention and full_attention it does)")));
        return;
      }
      config.layer_windows.push_back(name == "sliding_attention" ? window : 0);
    }
  } else if (local_and_global) {
    // Every sliding_window_pattern-th layer is global.
    const int64_t pattern =
        reader.PositiveInteger(Field(arch::Param::kSlidingWindowPattern),
                               IntegerDefault(family, arch::Param::kSlidingWindowPattern));
    for (int64_t layer = 0; layer < layers; ++layer) {
      const bool slides = pattern > 0 && (layer + 1) % pattern != 0;
      config.layer_windows.push_back(slides ? window : 0);
    }
  } else {
    const int64_t first_windowed =
        family.layer.windows == arch::Windows::kFromMaxWindowLayers
            ? reader.PositiveInteger(Field(arch::Param::kMaxWindowLayers),
                                     IntegerDefault(family, arch::Param::kMaxWindowLayers))
            : 0;
    for (int64_t layer = 0; layer < layers; ++layer) {
      config.layer_windows.push_back(layer >= first_windowed ? window : 0);
    }
  }
  if (std::all_of(config.layer_windows.begin(), config.layer_windows.end(),
                  [](int64_t w) { return w == 0; })) {
    config.layer_windows.clear();
  }
}

absl::Status CheckShapes(const DecoderConfig& config, const FieldReader& reader) {
  if (config.num_attention_heads % config.num_key_value_heads != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(reader.Where("num_key_value_heads"), " (", config.num_key_value_heads,
                     ") must divide num_attention_heads (", config.num_attention_heads, ")"));
  }
  if (config.head_dim % 2 != 0) {
    return absl::InvalidArgumentError(absl::StrCat(reader.Where("head_dim"), " (", config.head_dim,
                                                   ") must be even for rotary embeddings"));
  }
  return absl::OkStatus();
}

// The MLP's activation, under the family's field where the config has it
// and hidden_act otherwise.
absl::Status CheckActivation(FieldReader& reader, const arch::Family& family) {
  const std::string key = reader.Find(family.config_activation_field) != nullptr
                              ? std::string(family.config_activation_field)
                              : "hidden_act";
  const std::string expected =
      family.layer.activation == arch::Activation::kGeluTanh ? "gelu_pytorch_tanh" : "silu";
  std::string activation = reader.String(key, expected);
  if (reader.status().ok() && activation != expected) {
    return absl::UnimplementedError(absl::StrCat(reader.Where(key), " '", activation,
                                                 "' is not supported (", expected, " is)"));
  }
  return reader.status();
}

// A soft cap: the family's default where the config lacks the key, none
// where it is null.
double SoftCap(FieldReader& reader, const arch::Family& family, arch::Param param) {
  const std::string key = Field(param);
  if (!reader.Has(key)) return NumberDefault(family, param).value_or(0.0);
  if (reader.Find(key) == nullptr) return 0.0;
  return reader.PositiveNumber(key);
}

void ReadBiases(FieldReader& reader, const arch::Family& family, DecoderConfig& config) {
  switch (family.config_biases) {
    case arch::ConfigBiases::kNone:
      break;
    case arch::ConfigBiases::kQkvAlways:
      config.attention_qkv_bias = true;
      break;
    case arch::ConfigBiases::kAttentionBias:
      config.attention_qkv_bias = reader.Bool("attention_bias", false);
      config.attention_output_bias = config.attention_qkv_bias;
      break;
    case arch::ConfigBiases::kAttentionAndMlpBias:
      config.attention_qkv_bias = reader.Bool("attention_bias", false);
      config.attention_output_bias = config.attention_qkv_bias;
      config.mlp_bias = reader.Bool("mlp_bias", false);
      break;
  }
}

// The scores' scale and soft caps.
void ReadScores(FieldReader& reader, const arch::Family& family, DecoderConfig& config) {
  if (family.layer.query_pre_attn_scalar) {
    config.query_pre_attn_scalar =
        reader.PositiveNumber(Field(arch::Param::kQueryPreAttnScalar),
                              NumberDefault(family, arch::Param::kQueryPreAttnScalar));
  }
  config.attn_logit_softcapping = SoftCap(reader, family, arch::Param::kAttentionSoftcap);
  config.final_logit_softcapping = SoftCap(reader, family, arch::Param::kFinalLogitSoftcap);
  if (reader.Bool("use_bidirectional_attention", false) && reader.status().ok()) {
    reader.Fail(absl::UnimplementedError(absl::StrCat(
        config.architecture.empty() ? "this model" : config.architecture, ": ",
        reader.Where("use_bidirectional_attention"),
        " is true; kvjit builds causal decoders only")));
  }
}

absl::StatusOr<DecoderConfig> ReadDecoder(FieldReader& reader) {
  DecoderConfig config;
  absl::StatusOr<const arch::Family*> read_family = ReadFamily(reader, config.architecture);
  if (!read_family.ok()) return read_family.status();
  config.family = *read_family;
  const arch::Family& family = **read_family;
  if (absl::Status status = CheckActivation(reader, family); !status.ok()) return status;

  using arch::Param;
  auto integer = [&](Param param) {
    return reader.PositiveInteger(Field(param), IntegerDefault(family, param));
  };
  config.hidden_size = integer(Param::kHiddenSize);
  config.intermediate_size = integer(Param::kIntermediateSize);
  config.num_hidden_layers = integer(Param::kNumLayers);
  config.num_attention_heads = integer(Param::kNumHeads);
  config.num_key_value_heads =
      reader.PositiveInteger(Field(Param::kNumKvHeads),
                             IntegerDefault(family, Param::kNumKvHeads)
                                 .value_or(config.num_attention_heads));
  config.max_position_embeddings = integer(Param::kContextLength);
  config.vocab_size = integer(Param::kVocabSize);
  config.rms_norm_eps =
      reader.PositiveNumber(Field(Param::kRmsNormEps), NumberDefault(family, Param::kRmsNormEps));
  if (!reader.status().ok()) return reader.status();

  if (reader.Find(Field(Param::kHeadDim)) != nullptr ||
      IntegerDefault(family, Param::kHeadDim).has_value()) {
    config.head_dim = integer(Param::kHeadDim);
  } else if (config.hidden_size % config.num_attention_heads != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        reader.Where("num_attention_heads"), " (", config.num_attention_heads,
        ") must divide hidden_size (", config.hidden_size, ") when head_dim is not given"));
  } else {
    config.head_dim = config.hidden_size / config.num_attention_heads;
  }

  ReadRope(reader, family, config);
  config.tie_word_embeddings =
      reader.Bool(Field(Param::kTieWordEmbeddings),
                  NumberDefault(family, Param::kTieWordEmbeddings).value_or(0.0) != 0.0);
  ReadBiases(reader, family, config);
  ReadScores(reader, family, config);
  if (reader.Find("partial_rotary_factor") != nullptr &&
      reader.PositiveNumber("partial_rotary_factor") != 1.0 && reader.status().ok()) {
    return absl::UnimplementedError(absl::StrCat(
        reader.Where("partial_rotary_factor"), " ", reader.Find("partial_rotary_factor")->dump(),
        " is not supported (rope over part of each head: only 1.0 is)"));
  }
  ReadSlidingWindows(reader, family, config);
  config.bos_token_ids = reader.TokenIds("bos_token_id");
  config.eos_token_ids = reader.TokenIds("eos_token_id");
  config.torch_dtype = ReadTorchDtype(reader);
  if (!reader.status().ok()) return reader.status();

  if (absl::Status status = CheckShapes(config, reader); !status.ok()) return status;
  return config;
}

// A multimodal checkpoint describes its decoder in text_config; the token
// ids and dtype it leaves out are at the top level.
absl::StatusOr<DecoderConfig> ReadMultimodalDecoder(const nlohmann::json& json,
                                                    FieldReader& reader,
                                                    const arch::Family& family) {
  const std::string text_model_type(family.config_model_types.front());
  const nlohmann::json* text = reader.Find("text_config");
  if (text == nullptr || !text->is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(
        reader.Where("text_config"), " must be an object (model_type ",
        family.multimodal_model_type, " keeps its decoder's settings there)"));
  }
  nlohmann::json decoder = *text;
  if (!decoder.contains("model_type")) decoder["model_type"] = text_model_type;
  for (const char* key : {"bos_token_id", "eos_token_id", "torch_dtype", "dtype"}) {
    if (!decoder.contains(key) && json.contains(key)) decoder[key] = json.at(key);
  }
  FieldReader text_reader(decoder, reader.Where("text_config."));
  if (const nlohmann::json* type = text_reader.Find("model_type");
      type == nullptr || *type != text_model_type) {
    return absl::UnimplementedError(absl::StrCat(
        text_reader.Where("model_type"), " ", type == nullptr ? "null" : type->dump(),
        " is not supported in a ", family.multimodal_model_type, " config (", text_model_type,
        " is)"));
  }
  absl::StatusOr<DecoderConfig> config = ReadDecoder(text_reader);
  if (!config.ok()) return config.status();
  // The multimodal model's class, of which kvjit builds the text decoder.
  absl::StatusOr<std::string> architecture = ReadArchitecture(reader);
  if (!architecture.ok()) return architecture.status();
  config->architecture = *architecture;
  return config;
}

absl::StatusOr<DecoderConfig> ReadConfigJson(const nlohmann::json& json, absl::string_view source) {
  if (!json.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": must be a JSON object"));
  }
  FieldReader reader(json, absl::StrCat(source, ": "));
  if (const arch::Family* family = arch::FindMultimodalModelType(reader.String("model_type", ""))) {
    return ReadMultimodalDecoder(json, reader, *family);
  }
  return ReadDecoder(reader);
}

}  // namespace

absl::StatusOr<DecoderConfig> ParseDecoderConfig(absl::string_view json_text,
                                                 absl::string_view source) {
  absl::StatusOr<nlohmann::json> json = ParseJson(json_text, source);
  if (!json.ok()) return json.status();
  return ReadConfigJson(*json, source);
}

absl::StatusOr<DecoderConfig> LoadDecoderConfig(const std::string& directory) {
  std::string path = (std::filesystem::path(directory) / "config.json").string();
  absl::StatusOr<nlohmann::json> json = ReadJsonFile(path);
  if (!json.ok()) return json.status();
  return ReadConfigJson(*json, path);
}

}  // namespace kvjit::hf
