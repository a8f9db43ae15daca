#include "frontend/huggingface/HfConfig.h"

#include <ostream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/unit/frontend/huggingface/SafetensorsTestFiles.h"

namespace kvjit::hf {
namespace {

using ::kvjit::safetensors::testing::ErrorMessage;
using ::kvjit::safetensors::testing::TempDir;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// SmolLM2-135M's config.json, trimmed to the keys that matter.
constexpr char kSmolLm2Config[] = R"({
  "architectures": ["LlamaForCausalLM"],
  "attention_bias": false,
  "bos_token_id": 1,
  "eos_token_id": 2,
  "hidden_act": "silu",
  "hidden_size": 576,
  "intermediate_size": 1536,
  "max_position_embeddings": 8192,
  "model_type": "llama",
  "num_attention_heads": 9,
  "num_hidden_layers": 30,
  "num_key_value_heads": 3,
  "rms_norm_eps": 1e-05,
  "rope_scaling": null,
  "rope_theta": 100000,
  "tie_word_embeddings": true,
  "torch_dtype": "bfloat16",
  "vocab_size": 49152
})";

TEST(HfConfigTest, ParsesLlama) {
  absl::StatusOr<DecoderConfig> config = ParseDecoderConfig(kSmolLm2Config);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->family->name, "llama");
  EXPECT_EQ(config->architecture, "LlamaForCausalLM");
  EXPECT_EQ(config->hidden_size, 576);
  EXPECT_EQ(config->intermediate_size, 1536);
  EXPECT_EQ(config->num_hidden_layers, 30);
  EXPECT_EQ(config->num_attention_heads, 9);
  EXPECT_EQ(config->num_key_value_heads, 3);
  EXPECT_EQ(config->head_dim, 64);
  EXPECT_EQ(config->max_position_embeddings, 8192);
  EXPECT_EQ(config->vocab_size, 49152);
  EXPECT_DOUBLE_EQ(config->rms_norm_eps, 1e-5);
  EXPECT_DOUBLE_EQ(config->rope_theta, 100000.0);
  EXPECT_EQ(config->rope_scaling.kind, RopeScalingKind::kNone);
  EXPECT_TRUE(config->tie_word_embeddings);
  EXPECT_FALSE(config->attention_qkv_bias);
  EXPECT_FALSE(config->attention_output_bias);
  EXPECT_FALSE(config->mlp_bias);
  EXPECT_THAT(config->bos_token_ids, ElementsAre(1));
  EXPECT_THAT(config->eos_token_ids, ElementsAre(2));
  EXPECT_EQ(config->torch_dtype, quant::StorageType::kBF16);
}

TEST(HfConfigTest, AppliesDefaults) {
  absl::StatusOr<DecoderConfig> config = ParseDecoderConfig(R"({
    "model_type": "llama", "hidden_size": 64, "intermediate_size": 172,
    "num_hidden_layers": 5, "num_attention_heads": 8, "max_position_embeddings": 256,
    "vocab_size": 512, "rms_norm_eps": 1e-6})");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->num_key_value_heads, 8);
  EXPECT_EQ(config->head_dim, 8);
  EXPECT_DOUBLE_EQ(config->rope_theta, 10000.0);
  EXPECT_FALSE(config->tie_word_embeddings);
  EXPECT_THAT(config->bos_token_ids, IsEmpty());
  EXPECT_THAT(config->eos_token_ids, IsEmpty());
  EXPECT_EQ(config->torch_dtype, std::nullopt);
  EXPECT_TRUE(config->architecture.empty());
}

TEST(HfConfigTest, ParsesLlama3RopeScalingAndExplicitHeadDim) {
  // Llama 3.2 1B.
  absl::StatusOr<DecoderConfig> config = ParseDecoderConfig(R"({
    "architectures": ["LlamaForCausalLM"], "attention_bias": false, "bos_token_id": 128000,
    "eos_token_id": [128001, 128008, 128009], "head_dim": 64, "hidden_act": "silu",
    "hidden_size": 2048, "intermediate_size": 8192, "max_position_embeddings": 131072,
    "mlp_bias": false, "model_type": "llama", "num_attention_heads": 32,
    "num_hidden_layers": 16, "num_key_value_heads": 8, "rms_norm_eps": 1e-05,
    "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                     "original_max_position_embeddings": 8192, "rope_type": "llama3"},
    "rope_theta": 500000.0, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
    "vocab_size": 128256})");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->head_dim, 64);
  EXPECT_DOUBLE_EQ(config->rope_theta, 500000.0);
  EXPECT_EQ(config->rope_scaling.kind, RopeScalingKind::kLlama3);
  EXPECT_DOUBLE_EQ(config->rope_scaling.factor, 32.0);
  EXPECT_DOUBLE_EQ(config->rope_scaling.low_freq_factor, 1.0);
  EXPECT_DOUBLE_EQ(config->rope_scaling.high_freq_factor, 4.0);
  EXPECT_EQ(config->rope_scaling.original_context, 8192);
  EXPECT_THAT(config->eos_token_ids, ElementsAre(128001, 128008, 128009));
}

TEST(HfConfigTest, ParsesLinearRopeScalingWrittenWithType) {
  nlohmann::json json = nlohmann::json::parse(kSmolLm2Config);
  json["rope_scaling"] = {{"type", "linear"}, {"factor", 4}};
  absl::StatusOr<DecoderConfig> config = ParseDecoderConfig(json.dump());
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->rope_scaling.kind, RopeScalingKind::kLinear);
  EXPECT_DOUBLE_EQ(config->rope_scaling.factor, 4.0);
}

TEST(HfConfigTest, ReadsRopeParametersOfNewerConfigs) {
  nlohmann::json json = nlohmann::json::parse(kSmolLm2Config);
  json.erase("rope_theta");
  json.erase("rope_scaling");
  json["rope_parameters"] = {{"rope_theta", 250000.0}, {"rope_type", "default"}};
  absl::StatusOr<DecoderConfig> config = ParseDecoderConfig(json.dump());
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_DOUBLE_EQ(config->rope_theta, 250000.0);
  EXPECT_EQ(config->rope_scaling.kind, RopeScalingKind::kNone);
}

TEST(HfConfigTest, LlamaAttentionBiasCoversAllProjections) {
  nlohmann::json json = nlohmann::json::parse(kSmolLm2Config);
  json["attention_bias"] = true;
  json["mlp_bias"] = true;
  json.erase("torch_dtype");
  json["dtype"] = "float16";
  absl::StatusOr<DecoderConfig> config = ParseDecoderConfig(json.dump());
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE(config->attention_qkv_bias);
  EXPECT_TRUE(config->attention_output_bias);
  EXPECT_TRUE(config->mlp_bias);
  EXPECT_EQ(config->torch_dtype, quant::StorageType::kF16);
}

TEST(HfConfigTest, ParsesQwen3WithItsOwnHeadDimAndNoBias) {
  // Qwen3-0.6B.
  absl::StatusOr<DecoderConfig> config = ParseDecoderConfig(R"({
    "architectures": ["Qwen3ForCausalLM"], "attention_bias": false, "bos_token_id": 151643,
    "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu", "hidden_size": 1024,
    "intermediate_size": 3072, "max_position_embeddings": 40960, "model_type": "qwen3",
    "num_attention_heads": 16, "num_hidden_layers": 28, "num_key_value_heads": 8,
    "rms_norm_eps": 1e-06, "rope_scaling": null, "rope_theta": 1000000,
    "tie_word_embeddings": true, "torch_dtype": "bfloat16", "vocab_size": 151936})");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->family->name, "qwen3");
  EXPECT_EQ(config->head_dim, 128);  // not 1024 / 16
  EXPECT_FALSE(config->attention_qkv_bias);
  EXPECT_FALSE(config->attention_output_bias);
  EXPECT_TRUE(config->tie_word_embeddings);
}

TEST(HfConfigTest, ParsesMistralWithItsSlidingWindowOnEveryLayer) {
  // Mistral 7B v0.1.
  absl::StatusOr<DecoderConfig> config = ParseDecoderConfig(R"({
    "architectures": ["MistralForCausalLM"], "bos_token_id": 1, "eos_token_id": 2,
    "hidden_act": "silu", "hidden_size": 4096, "intermediate_size": 14336,
    "max_position_embeddings": 32768, "model_type": "mistral", "num_attention_heads": 32,
    "num_hidden_layers": 32, "num_key_value_heads": 8, "rms_norm_eps": 1e-05,
    "rope_theta": 10000.0, "sliding_window": 4096, "tie_word_embeddings": false,
    "torch_dtype": "bfloat16", "vocab_size": 32000})");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->family->name, "mistral");
  EXPECT_EQ(config->head_dim, 128);
  EXPECT_EQ(config->num_key_value_heads, 8);
  EXPECT_FALSE(config->attention_qkv_bias);
  EXPECT_FALSE(config->attention_output_bias);
  EXPECT_EQ(config->layer_windows, std::vector<int64_t>(32, 4096));
}

constexpr char kTinyMistral[] = R"({
    "architectures": ["MistralForCausalLM"], "model_type": "mistral", "hidden_size": 64,
    "intermediate_size": 96, "max_position_embeddings": 256, "num_attention_heads": 4,
    "num_hidden_layers": 3, "rms_norm_eps": 1e-05, "vocab_size": 100})";

// Mistral v0.2 and later set sliding_window to null: full attention.
TEST(HfConfigTest, MistralWithoutASlidingWindowAttendsOverEverything) {
  nlohmann::json json = nlohmann::json::parse(kTinyMistral);
  json["sliding_window"] = nullptr;
  absl::StatusOr<DecoderConfig> config = ParseDecoderConfig(json.dump());
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE(config->layer_windows.empty());
}

// transformers' layer_types names each layer's kind where a config has it.
TEST(HfConfigTest, LayerTypesNameTheWindowedLayers) {
  nlohmann::json json = nlohmann::json::parse(kTinyMistral);
  json["sliding_window"] = 16;
  json["layer_types"] = {"sliding_attention", "full_attention", "sliding_attention"};
  absl::StatusOr<DecoderConfig> config = ParseDecoderConfig(json.dump());
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_THAT(config->layer_windows, ElementsAre(16, 0, 16));

  json["layer_types"] = {"sliding_attention", "chunked_attention", "full_attention"};
  EXPECT_THAT(ErrorMessage(ParseDecoderConfig(json.dump())),
              HasSubstr("MistralForCausalLM: config.json: layer_types names the layer kind "
                        "'chunked_attention', which kvjit does not build"));
  json["layer_types"] = {"full_attention"};
  EXPECT_THAT(ErrorMessage(ParseDecoderConfig(json.dump())),
              HasSubstr("layer_types must list one kind for each of the 3 layers"));
}

// Gemma 2 as transformers 5 writes it (tests/data/transformers/gemma2-f32):
// layer_types, rope_parameters.
constexpr char kTinyGemma2[] = R"({
  "architectures": ["Gemma2ForCausalLM"], "model_type": "gemma2",
  "attn_logit_softcapping": 50.0, "final_logit_softcapping": 30.0,
  "head_dim": 16, "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 32,
  "intermediate_size": 64, "max_position_embeddings": 256, "num_attention_heads": 2,
  "num_hidden_layers": 4, "num_key_value_heads": 1, "query_pre_attn_scalar": 16,
  "rms_norm_eps": 1e-06, "rope_parameters": {"rope_theta": 10000.0, "rope_type": "default"},
  "layer_types": ["sliding_attention", "full_attention", "sliding_attention", "full_attention"],
  "sliding_window": 8, "tie_word_embeddings": true, "use_bidirectional_attention": null,
  "vocab_size": 2001, "dtype": "float32"
})";

TEST(HfConfigTest, ParsesGemma2OfTransformers5) {
  absl::StatusOr<DecoderConfig> config = ParseDecoderConfig(kTinyGemma2);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->family->name, "gemma2");
  EXPECT_EQ(config->head_dim, 16);
  EXPECT_THAT(config->layer_windows, ElementsAre(8, 0, 8, 0));
  EXPECT_DOUBLE_EQ(config->query_pre_attn_scalar, 16.0);
  EXPECT_DOUBLE_EQ(config->attn_logit_softcapping, 50.0);
  EXPECT_DOUBLE_EQ(config->final_logit_softcapping, 30.0);
  EXPECT_DOUBLE_EQ(config->rope_theta, 10000.0);
  EXPECT_DOUBLE_EQ(config->local_rope_theta, 10000.0);
  EXPECT_TRUE(config->tie_word_embeddings);
}

// transformers 5 may write Gemma 2's rope per layer kind, as for Gemma 3:
// the sliding layers then rotate at their own base.
TEST(HfConfigTest, ParsesGemma2RopePerLayerKind) {
  nlohmann::json json = nlohmann::json::parse(kTinyGemma2);
  json["rope_parameters"] = nlohmann::json::parse(R"({
    "full_attention": {"rope_theta": 20000.0, "rope_type": "default"},
    "sliding_attention": {"rope_theta": 5000.0, "rope_type": "default"}})");
  absl::StatusOr<DecoderConfig> config = ParseDecoderConfig(json.dump());
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_DOUBLE_EQ(config->rope_theta, 20000.0);
  EXPECT_DOUBLE_EQ(config->local_rope_theta, 5000.0);
}

// A family whose layers all rotate alike refuses a sliding rope of another
// base instead of dropping it, and reads one of the same base.
TEST(HfConfigTest, RefusesASlidingRopeOfAnotherBaseWhereLayersRotateAlike) {
  nlohmann::json json = nlohmann::json::parse(kTinyGemma2);
  json["model_type"] = "mistral";
  json["architectures"] = {"MistralForCausalLM"};
  json["hidden_act"] = "silu";
  json["rope_parameters"] = nlohmann::json::parse(R"({
    "full_attention": {"rope_theta": 20000.0, "rope_type": "default"},
    "sliding_attention": {"rope_theta": 5000.0, "rope_type": "default"}})");
  EXPECT_THAT(ErrorMessage(ParseDecoderConfig(json.dump())),
              HasSubstr("rope_parameters.sliding_attention.rope_theta 5000 differs from "
                        "full_attention's 20000; kvjit rotates every layer of this family at "
                        "one base"));
  json["rope_parameters"]["sliding_attention"]["rope_theta"] = 20000.0;
  absl::StatusOr<DecoderConfig> config = ParseDecoderConfig(json.dump());
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_DOUBLE_EQ(config->rope_theta, 20000.0);
}

// Gemma 2 as the Hub's checkpoints have it (transformers 4): rope_theta at
// the top, no layer_types (even layers slide), hidden_act beside
// hidden_activation; transformers' defaults where keys are absent, no cap
// where one is null.
TEST(HfConfigTest, ParsesGemma2OfTransformers4) {
  nlohmann::json json = nlohmann::json::parse(kTinyGemma2);
  for (const char* key : {"layer_types", "rope_parameters", "tie_word_embeddings",
                          "query_pre_attn_scalar", "attn_logit_softcapping"}) {
    json.erase(key);
  }
  json["rope_theta"] = 20000.0;
  json["hidden_act"] = "gelu_pytorch_tanh";
  json["final_logit_softcapping"] = nullptr;
  absl::StatusOr<DecoderConfig> config = ParseDecoderConfig(json.dump());
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_THAT(config->layer_windows, ElementsAre(8, 0, 8, 0));
  EXPECT_DOUBLE_EQ(config->rope_theta, 20000.0);
  EXPECT_DOUBLE_EQ(config->local_rope_theta, 20000.0);
  EXPECT_DOUBLE_EQ(config->query_pre_attn_scalar, 256.0);
  EXPECT_DOUBLE_EQ(config->attn_logit_softcapping, 50.0);
  EXPECT_DOUBLE_EQ(config->final_logit_softcapping, 0.0);
  EXPECT_TRUE(config->tie_word_embeddings);
}

// Gemma 3 as transformers 5 writes it: one rope per layer kind.
TEST(HfConfigTest, ParsesGemma3TextOfTransformers5) {
  nlohmann::json json = nlohmann::json::parse(kTinyGemma2);
  json["model_type"] = "gemma3_text";
  json["num_hidden_layers"] = 6;
  json["layer_types"] = {"sliding_attention", "sliding_attention", "sliding_attention",
                         "sliding_attention", "sliding_attention", "full_attention"};
  json["attn_logit_softcapping"] = nullptr;
  json["final_logit_softcapping"] = nullptr;
  json["rope_parameters"] = nlohmann::json::parse(R"({
    "full_attention": {"rope_theta": 1000000.0, "rope_type": "linear", "factor": 8.0},
    "sliding_attention": {"rope_theta": 10000.0, "rope_type": "default"}})");
  absl::StatusOr<DecoderConfig> config = ParseDecoderConfig(json.dump());
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->family->name, "gemma3");
  EXPECT_THAT(config->layer_windows, ElementsAre(8, 8, 8, 8, 8, 0));
  EXPECT_DOUBLE_EQ(config->rope_theta, 1e6);
  EXPECT_EQ(config->rope_scaling.kind, RopeScalingKind::kLinear);
  EXPECT_DOUBLE_EQ(config->rope_scaling.factor, 8.0);
  EXPECT_DOUBLE_EQ(config->local_rope_theta, 10000.0);
  EXPECT_DOUBLE_EQ(config->attn_logit_softcapping, 0.0);
  EXPECT_DOUBLE_EQ(config->final_logit_softcapping, 0.0);
}

// A multimodal Gemma 3 of the Hub (gemma-3-4b-it's config.json, shortened):
// the decoder in text_config, which leaves transformers' Gemma3TextConfig
// defaults out; the token ids at the top; rope_local_base_freq and
// sliding_window_pattern of transformers 4.
TEST(HfConfigTest, ParsesGemma3TextConfigOfAMultimodalCheckpoint) {
  absl::StatusOr<DecoderConfig> config = ParseDecoderConfig(R"({
    "architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3",
    "bos_token_id": 2, "eos_token_id": [1, 106], "torch_dtype": "bfloat16",
    "text_config": {
      "hidden_size": 2560, "intermediate_size": 10240, "model_type": "gemma3_text",
      "num_hidden_layers": 34, "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
      "sliding_window": 1024
    },
    "vision_config": {"model_type": "siglip_vision_model"}
  })");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->family->name, "gemma3");
  EXPECT_EQ(config->architecture, "Gemma3ForConditionalGeneration");
  EXPECT_EQ(config->hidden_size, 2560);
  EXPECT_EQ(config->num_hidden_layers, 34);
  EXPECT_EQ(config->num_attention_heads, 8);
  EXPECT_EQ(config->num_key_value_heads, 4);
  EXPECT_EQ(config->head_dim, 256);
  EXPECT_EQ(config->vocab_size, 262208);
  EXPECT_EQ(config->max_position_embeddings, 131072);
  EXPECT_DOUBLE_EQ(config->rms_norm_eps, 1e-6);
  EXPECT_DOUBLE_EQ(config->rope_theta, 1e6);
  EXPECT_EQ(config->rope_scaling.kind, RopeScalingKind::kLinear);
  EXPECT_DOUBLE_EQ(config->local_rope_theta, 10000.0);
  EXPECT_DOUBLE_EQ(config->query_pre_attn_scalar, 256.0);
  ASSERT_EQ(config->layer_windows.size(), 34u);
  for (size_t layer = 0; layer < 34; ++layer) {
    EXPECT_EQ(config->layer_windows[layer], (layer + 1) % 6 == 0 ? 0 : 1024) << layer;
  }
  EXPECT_TRUE(config->tie_word_embeddings);
  EXPECT_THAT(config->bos_token_ids, ElementsAre(2));
  EXPECT_THAT(config->eos_token_ids, ElementsAre(1, 106));
  EXPECT_EQ(config->torch_dtype, quant::StorageType::kBF16);
}

TEST(HfConfigTest, ParsesPhi3WithLongRope) {
  // Phi-3-mini-128k-instruct, its 48 factors per list cut to 4.
  absl::StatusOr<DecoderConfig> config = ParseDecoderConfig(R"({
    "architectures": ["Phi3ForCausalLM"], "bos_token_id": 1, "eos_token_id": 32000,
    "hidden_act": "silu", "hidden_size": 3072, "intermediate_size": 8192,
    "max_position_embeddings": 131072, "model_type": "phi3", "num_attention_heads": 32,
    "num_hidden_layers": 32, "num_key_value_heads": 32, "original_max_position_embeddings": 4096,
    "rms_norm_eps": 1e-05, "rope_scaling": {"long_factor": [1.08, 1.1, 1.13, 1.19],
    "short_factor": [1.05, 1.05, 1.05, 1.1], "type": "longrope"}, "rope_theta": 10000.0,
    "sliding_window": 262144, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
    "vocab_size": 32064})");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->family->name, "phi3");
  EXPECT_EQ(config->head_dim, 96);
  EXPECT_EQ(config->rope_scaling.kind, RopeScalingKind::kNone);
  ASSERT_TRUE(config->long_rope.has_value());
  EXPECT_THAT(config->long_rope->long_factor, ElementsAre(1.08, 1.1, 1.13, 1.19));
  EXPECT_THAT(config->long_rope->short_factor, ElementsAre(1.05, 1.05, 1.05, 1.1));
  EXPECT_EQ(config->long_rope->original_max_position_embeddings, 4096);
  EXPECT_FALSE(config->long_rope->attention_factor.has_value());
  EXPECT_EQ(config->layer_windows, std::vector<int64_t>(32, 262144));
  EXPECT_FALSE(config->attention_qkv_bias);
}

TEST(HfConfigTest, ParsesQwen2WithImpliedQkvBias) {
  // Qwen2.5-0.5B-Instruct.
  absl::StatusOr<DecoderConfig> config = ParseDecoderConfig(R"({
    "architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 151643,
    "eos_token_id": 151645, "hidden_act": "silu", "hidden_size": 896,
    "intermediate_size": 4864, "max_position_embeddings": 32768, "max_window_layers": 21,
    "model_type": "qwen2", "num_attention_heads": 14, "num_hidden_layers": 24,
    "num_key_value_heads": 2, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
    "sliding_window": 32768, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
    "use_sliding_window": false, "vocab_size": 151936})");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->family->name, "qwen2");
  EXPECT_EQ(config->head_dim, 64);
  EXPECT_TRUE(config->attention_qkv_bias);
  EXPECT_FALSE(config->attention_output_bias);
  EXPECT_TRUE(config->tie_word_embeddings);
  EXPECT_THAT(config->eos_token_ids, ElementsAre(151645));
  EXPECT_TRUE(config->layer_windows.empty()) << "use_sliding_window is false";
}

// With use_sliding_window, Qwen2 windows the layers from max_window_layers on.
TEST(HfConfigTest, Qwen2WindowsLayersFromMaxWindowLayersOn) {
  absl::StatusOr<DecoderConfig> config = ParseDecoderConfig(R"({
    "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 64,
    "intermediate_size": 96, "max_position_embeddings": 256, "max_window_layers": 2,
    "num_attention_heads": 4, "num_hidden_layers": 4, "rms_norm_eps": 1e-06,
    "sliding_window": 32, "use_sliding_window": true, "vocab_size": 100})");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_THAT(config->layer_windows, ElementsAre(0, 0, 32, 32));
}

TEST(HfConfigTest, InfersModelTypeFromArchitectures) {
  nlohmann::json json = nlohmann::json::parse(kSmolLm2Config);
  json.erase("model_type");
  json["architectures"] = {"Qwen2ForCausalLM"};
  absl::StatusOr<DecoderConfig> config = ParseDecoderConfig(json.dump());
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->family->name, "qwen2");
}

TEST(HfConfigTest, LoadsFromDirectoryAndNamesPathInErrors) {
  TempDir dir;
  dir.WriteFile("config.json", kSmolLm2Config);
  absl::StatusOr<DecoderConfig> config = LoadDecoderConfig(dir.path());
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->hidden_size, 576);

  std::string path = dir.WriteFile("config.json", R"({"model_type": "llama"})");
  EXPECT_THAT(ErrorMessage(LoadDecoderConfig(dir.path())),
              HasSubstr(path + ": hidden_size is missing"));
}

TEST(HfConfigTest, MissingFileIsNotFound) {
  TempDir dir;
  absl::StatusOr<DecoderConfig> config = LoadDecoderConfig(dir.path());
  EXPECT_EQ(config.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(ErrorMessage(config), HasSubstr("config.json"));
}

TEST(HfConfigTest, InvalidJsonIsRefused) {
  EXPECT_THAT(ErrorMessage(ParseDecoderConfig("{\"hidden_size\": ")),
              HasSubstr("config.json: invalid JSON"));
  EXPECT_THAT(ErrorMessage(ParseDecoderConfig("[]")),
              HasSubstr("config.json: must be a JSON object"));
}

// A JSON merge patch over kSmolLm2Config (null removes a key), and the words
// the error must contain.
struct BadConfigCase {
  std::string test_name;
  std::string patch;
  std::string expected_message;
};

// Names the case in failure output instead of dumping its bytes.
void PrintTo(const BadConfigCase& test_case, std::ostream* out) { *out << test_case.test_name; }

class BadConfigTest : public ::testing::TestWithParam<BadConfigCase> {};

TEST_P(BadConfigTest, IsRefusedWithMessage) {
  nlohmann::json json = nlohmann::json::parse(kSmolLm2Config);
  json.merge_patch(nlohmann::json::parse(GetParam().patch));
  EXPECT_THAT(ErrorMessage(ParseDecoderConfig(json.dump())),
              HasSubstr("config.json: " + GetParam().expected_message));
}

INSTANTIATE_TEST_SUITE_P(
    AllCases, BadConfigTest,
    ::testing::Values(
        BadConfigCase{"UnsupportedModelType", R"({"model_type": "gemma"})",
                      "model_type 'gemma' is not supported (llama, mistral, qwen2, qwen3, phi3, "
                      "gemma2, gemma3_text, gemma3 are)"},
        BadConfigCase{"GemmaWithSilu", R"({"model_type": "gemma2"})",
                      "hidden_act 'silu' is not supported (gelu_pytorch_tanh is)"},
        BadConfigCase{"GemmaWithAnotherActivation",
                      R"({"model_type": "gemma2", "hidden_activation": "gelu"})",
                      "hidden_activation 'gelu' is not supported (gelu_pytorch_tanh is)"},
        BadConfigCase{"BidirectionalGemma3",
                      R"({"model_type": "gemma3_text", "hidden_act": "gelu_pytorch_tanh",
                          "use_bidirectional_attention": true})",
                      "use_bidirectional_attention is true; kvjit builds causal decoders only"},
        BadConfigCase{"Gemma3WithoutTextConfig", R"({"model_type": "gemma3"})",
                      "text_config must be an object"},
        BadConfigCase{"Gemma3WithAnotherDecoder",
                      R"({"model_type": "gemma3", "text_config": {"model_type": "llama"}})",
                      "text_config.model_type \"llama\" is not supported in a gemma3 config"},
        BadConfigCase{"Gemma3ScaledSlidingRope",
                      R"({"model_type": "gemma3_text", "hidden_act": "gelu_pytorch_tanh",
                          "rope_parameters": {
                            "full_attention": {"rope_type": "default", "rope_theta": 1e6},
                            "sliding_attention": {"rope_type": "linear", "factor": 8}}})",
                      "rope_parameters.sliding_attention.rope_type 'linear' is not supported "
                      "(the sliding layers rotate unscaled)"},
        BadConfigCase{"NoModelType",
                      R"({"model_type": null, "architectures": ["GPT2LMHeadModel"]})",
                      "model_type is missing and architectures names no known model"},
        BadConfigCase{"ArchitecturesNotList", R"({"architectures": "LlamaForCausalLM"})",
                      "architectures must be a list of strings"},
        BadConfigCase{"MissingHiddenSize", R"({"hidden_size": null})", "hidden_size is missing"},
        BadConfigCase{"ZeroHiddenSize", R"({"hidden_size": 0})", "hidden_size must be positive"},
        BadConfigCase{"NegativeLayers", R"({"num_hidden_layers": -2})",
                      "num_hidden_layers must be a non-negative integer"},
        BadConfigCase{"StringVocabSize", R"({"vocab_size": "49152"})",
                      "vocab_size must be a non-negative integer"},
        BadConfigCase{"ZeroEps", R"({"rms_norm_eps": 0})",
                      "rms_norm_eps must be a positive number"},
        BadConfigCase{"HeadsDoNotDivideHidden", R"({"num_attention_heads": 7})",
                      "num_attention_heads (7) must divide hidden_size (576)"},
        BadConfigCase{"KvHeadsDoNotDivideHeads", R"({"num_key_value_heads": 2})",
                      "num_key_value_heads (2) must divide num_attention_heads (9)"},
        BadConfigCase{"OddHeadDim", R"({"head_dim": 63})", "head_dim (63) must be even"},
        BadConfigCase{"Gelu", R"({"hidden_act": "gelu"})", "hidden_act 'gelu' is not supported"},
        BadConfigCase{"TieNotBool", R"({"tie_word_embeddings": 1})",
                      "tie_word_embeddings must be true or false"},
        BadConfigCase{"BadEosToken", R"({"eos_token_id": [2, "x"]})",
                      "eos_token_id must be a non-negative integer"},
        BadConfigCase{"YarnScaling", R"({"rope_scaling": {"rope_type": "yarn", "factor": 4}})",
                      "rope_scaling type 'yarn' is not supported (linear, llama3, longrope are)"},
        BadConfigCase{"DynamicScaling", R"({"rope_scaling": {"type": "dynamic", "factor": 2}})",
                      "rope_scaling type 'dynamic' is not supported"},
        BadConfigCase{"ScalingNotObject", R"({"rope_scaling": 2})",
                      "rope_scaling must be null or an object"},
        BadConfigCase{"LinearWithoutFactor", R"({"rope_scaling": {"type": "linear"}})",
                      "rope_scaling.factor is missing"},
        BadConfigCase{"Llama3WithoutOriginalLength",
                      R"({"rope_scaling": {"rope_type": "llama3", "factor": 8,
                          "low_freq_factor": 1, "high_freq_factor": 4}})",
                      "rope_scaling.original_max_position_embeddings is missing"},
        BadConfigCase{"Llama3FactorsReversed",
                      R"({"rope_scaling": {"rope_type": "llama3", "factor": 8,
                          "low_freq_factor": 4, "high_freq_factor": 1,
                          "original_max_position_embeddings": 8192}})",
                      "rope_scaling.high_freq_factor must exceed low_freq_factor"},
        BadConfigCase{"LongRopeWithoutLongFactor",
                      R"({"rope_scaling": {"type": "longrope", "short_factor": [1, 1]},
                          "original_max_position_embeddings": 4096})",
                      "rope_scaling.long_factor must be a list of numbers"},
        BadConfigCase{"LongRopeWithZeroFactor",
                      R"({"rope_scaling": {"type": "su", "short_factor": [1, 0],
                          "long_factor": [1, 2]}, "original_max_position_embeddings": 4096})",
                      "rope_scaling.short_factor must hold positive numbers, got 0"},
        BadConfigCase{"LongRopeWithoutOriginalLength",
                      R"({"rope_scaling": {"type": "longrope", "short_factor": [1],
                          "long_factor": [2]}})",
                      "rope_scaling.original_max_position_embeddings is missing"},
        BadConfigCase{"PartialRotary", R"({"partial_rotary_factor": 0.75})",
                      "partial_rotary_factor 0.75 is not supported"},
        BadConfigCase{"ZeroRopeTheta", R"({"rope_theta": 0})",
                      "rope_theta must be a positive number"},
        BadConfigCase{"UnknownTorchDtype", R"({"torch_dtype": "float64"})",
                      "torch_dtype 'float64' is not supported"}),
    [](const ::testing::TestParamInfo<BadConfigCase>& info) { return info.param.test_name; });

}  // namespace
}  // namespace kvjit::hf
