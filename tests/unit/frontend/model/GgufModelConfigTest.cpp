// ModelConfigFromGguf on the keys and tensors llama.cpp's converter writes for
// Llama 3.1/3.2 (the rope_freqs tensor), Qwen3 (key_length, q/k norms),
// Phi-3 (fused projections, LongRoPE's factor tensors and attention factor),
// Gemma 2 (soft caps, alternating windows) and Gemma 3.

#include <cstring>
#include <string>
#include <vector>

#include "frontend/model/GgufModel.h"
#include "frontend/model/DecoderBuilder.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mlir/IR/MLIRContext.h"
#include "tests/unit/frontend/gguf/GgufTestWriter.h"
#include "tests/unit/frontend/model/InMemoryWeights.h"

namespace kvjit::model {
namespace {

using gguf::test::ByteWriter;
using gguf::test::GgufWriter;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr uint32_t kGgmlF32 = 0;
constexpr uint32_t kGgmlF16 = 1;

std::vector<uint8_t> FloatBytes(const std::vector<float>& values) {
  std::vector<uint8_t> bytes(values.size() * sizeof(float));
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

// The hyper-parameters of a model of `architecture` with `layers` layers:
// hidden 64, 4 heads (head_dim 16 unless key_length says otherwise),
// vocabulary 10.
GgufWriter ModelWriter(const std::string& architecture, uint32_t layers = 2) {
  GgufWriter writer;
  const std::string a = architecture + ".";
  writer.AddString("general.architecture", architecture)
      .AddUint32(a + "embedding_length", 64)
      .AddUint32(a + "feed_forward_length", 96)
      .AddUint32(a + "block_count", layers)
      .AddUint32(a + "attention.head_count", 4)
      .AddUint32(a + "attention.head_count_kv", 2)
      .AddUint32(a + "context_length", 256)
      .AddRaw(a + "attention.layer_norm_rms_epsilon", gguf::test::kFloat32, ByteWriter().F32(1e-6f))
      .AddRaw(a + "rope.freq_base", gguf::test::kFloat32, ByteWriter().F32(500000.0f));
  writer.AddTensor({"token_embd.weight", {64, 10}, kGgmlF32, FloatBytes(std::vector<float>(640)), std::nullopt});
  return writer;
}

absl::StatusOr<ModelConfig> ConfigOf(const GgufWriter& writer) {
  const std::vector<uint8_t> bytes = writer.Build();
  absl::StatusOr<std::unique_ptr<gguf::GgufFile>> file = gguf::GgufFile::FromBuffer("m.gguf", bytes);
  if (!file.ok()) return file.status();
  return ModelConfigFromGguf(**file);
}

TEST(GgufModelConfigTest, Llama3RopeFreqsBecomeTheRopesFrequencyFactors) {
  GgufWriter writer = ModelWriter("llama");
  const std::vector<float> factors = {1, 1, 1, 1, 3.25f, 32, 32, 32};
  writer.AddTensor({"rope_freqs.weight", {8}, kGgmlF32, FloatBytes(factors), std::nullopt});
  absl::StatusOr<ModelConfig> config = ConfigOf(writer);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_THAT(config->rope_freq_factors, ElementsAre(1, 1, 1, 1, 3.25f, 32, 32, 32));
  EXPECT_EQ(config->rope_scaling.kind, RopeScalingKind::kNone);
  EXPECT_EQ(config->rope_style, RopeStyle::kInterleaved);
  EXPECT_FALSE(config->qk_norm);
}

TEST(GgufModelConfigTest, RopeFreqsOfAnotherLengthOrTypeAreRefused) {
  GgufWriter short_factors = ModelWriter("llama");
  short_factors.AddTensor({"rope_freqs.weight", {6}, kGgmlF32, FloatBytes(std::vector<float>(6, 1)), std::nullopt});
  EXPECT_THAT(ConfigOf(short_factors).status().message(),
              HasSubstr("m.gguf: tensor 'rope_freqs.weight' must be f32 of 8 entries (head_dim / 2)"));

  GgufWriter f16_factors = ModelWriter("llama");
  f16_factors.AddTensor({"rope_freqs.weight", {8}, kGgmlF16, std::vector<uint8_t>(16, 0), std::nullopt});
  EXPECT_THAT(ConfigOf(f16_factors).status().message(), HasSubstr("must be f32 of 8 entries"));

  GgufWriter zero_factor = ModelWriter("llama");
  zero_factor.AddTensor({"rope_freqs.weight", {8}, kGgmlF32, FloatBytes({1, 1, 1, 0, 1, 1, 1, 1}), std::nullopt});
  EXPECT_THAT(ConfigOf(zero_factor).status().message(),
              HasSubstr("rope frequency factors must be positive and finite, got 0"));
}

// llama.cpp's key for a model whose every layer has a sliding window.
TEST(GgufModelConfigTest, SlidingWindowCoversEveryLayer) {
  for (const std::string architecture : {"llama", "phi3"}) {
    SCOPED_TRACE(architecture);
    const std::string key = architecture + ".attention.sliding_window";
    GgufWriter writer = ModelWriter(architecture);
    writer.AddUint32(key, 32);
    absl::StatusOr<ModelConfig> config = ConfigOf(writer);
    ASSERT_TRUE(config.ok()) << config.status();
    EXPECT_EQ(config->layer_windows, std::vector<int64_t>(2, 32));
    EXPECT_TRUE(ConfigOf(ModelWriter(architecture))->layer_windows.empty());

    // What llama.cpp's Phi-3 converter writes for a checkpoint without one.
    GgufWriter zero = ModelWriter(architecture);
    zero.AddUint32(key, 0);
    absl::StatusOr<ModelConfig> none = ConfigOf(zero);
    ASSERT_TRUE(none.ok()) << none.status();
    EXPECT_TRUE(none->layer_windows.empty());
  }
}

// A per-layer pattern of windowed and full layers is refused, naming the
// architecture and the key.
TEST(GgufModelConfigTest, SlidingWindowPatternIsRefused) {
  GgufWriter writer = ModelWriter("qwen2");
  writer.AddUint32("qwen2.attention.sliding_window", 32).AddUint32("qwen2.attention.sliding_window_pattern", 4);
  EXPECT_THAT(ConfigOf(writer).status().message(),
              HasSubstr("m.gguf: general.architecture 'qwen2' with qwen2.attention.sliding_window_pattern: kvjit "
                        "builds a sliding window on every layer or none"));
}

TEST(GgufModelConfigTest, Qwen3NormalizesQAndKWithItsOwnHeadDim) {
  GgufWriter writer = ModelWriter("qwen3");
  writer.AddUint32("qwen3.attention.key_length", 32).AddUint32("qwen3.attention.value_length", 32);
  absl::StatusOr<ModelConfig> config = ConfigOf(writer);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->architecture, "qwen3");
  EXPECT_EQ(config->head_dim, 32);
  EXPECT_TRUE(config->qk_norm);
  EXPECT_FALSE(config->qkv_bias);
  EXPECT_EQ(config->rope_style, RopeStyle::kNeox);
}

// Phi-3-mini-128k's layout at a 256-token context over a 64-token original.
GgufWriter Phi3Writer(uint32_t original_context) {
  GgufWriter writer = ModelWriter("phi3");
  writer.AddUint32("phi3.rope.scaling.original_context_length", original_context)
      .AddRaw("phi3.rope.scaling.attn_factor", gguf::test::kFloat32, ByteWriter().F32(1.25f))
      .AddUint32("phi3.attention.sliding_window", 0);
  writer.AddTensor({"rope_factors_long.weight", {8}, kGgmlF32,
                    FloatBytes({2, 2, 2, 2, 4, 4, 4, 4}), std::nullopt});
  writer.AddTensor({"rope_factors_short.weight", {8}, kGgmlF32,
                    FloatBytes({1, 1, 1, 1, 1.5f, 1.5f, 1.5f, 1.5f}), std::nullopt});
  return writer;
}

TEST(GgufModelConfigTest, Phi3BeyondItsOriginalContextTakesTheLongFactors) {
  absl::StatusOr<ModelConfig> config = ConfigOf(Phi3Writer(64));
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE(config->fused_projections);
  EXPECT_EQ(config->rope_style, RopeStyle::kNeox);
  EXPECT_THAT(config->rope_freq_factors, ElementsAre(2, 2, 2, 2, 4, 4, 4, 4));
  EXPECT_DOUBLE_EQ(config->rope_attention_factor, 1.25);
}

TEST(GgufModelConfigTest, Phi3WithinItsOriginalContextTakesTheShortFactors) {
  absl::StatusOr<ModelConfig> config = ConfigOf(Phi3Writer(256));
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_THAT(config->rope_freq_factors, ElementsAre(1, 1, 1, 1, 1.5f, 1.5f, 1.5f, 1.5f));
}

TEST(GgufModelConfigTest, Phi3WithOneFactorTensorIsRefused) {
  GgufWriter writer = ModelWriter("phi3");
  writer.AddTensor({"rope_factors_long.weight", {8}, kGgmlF32, FloatBytes(std::vector<float>(8, 2)),
                    std::nullopt});
  EXPECT_THAT(ConfigOf(writer).status().message(),
              HasSubstr("m.gguf: tensor 'rope_factors_short.weight' is missing beside its pair"));
}

TEST(GgufModelConfigTest, Gemma3TakesItsLayerAsLlamaCppRunsIt) {
  GgufWriter writer = ModelWriter("gemma3");
  writer.AddUint32("gemma3.attention.sliding_window", 512);
  absl::StatusOr<ModelConfig> config = ConfigOf(writer);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_DOUBLE_EQ(config->embedding_scale, 8.0);  // sqrt(64)
  EXPECT_TRUE(config->post_norms);
  EXPECT_TRUE(config->gelu_ffn);
  EXPECT_TRUE(config->qk_norm);
  EXPECT_DOUBLE_EQ(config->attention_scale, 0.25);  // 1 / sqrt(head_dim 16)
  EXPECT_EQ(config->layer_windows, std::vector<int64_t>({512, 512}));  // both layers local
  EXPECT_DOUBLE_EQ(config->local_rope_theta, 10000.0);
  EXPECT_DOUBLE_EQ(config->rope_theta, 500000.0);
  EXPECT_TRUE(config->IsLocalLayer(0));
  EXPECT_TRUE(config->IsLocalLayer(4));
  EXPECT_FALSE(config->IsLocalLayer(5));
  EXPECT_EQ(config->rope_style, RopeStyle::kNeox);
}

TEST(GgufModelConfigTest, Gemma2TakesItsSoftCapsAndAlternatingWindows) {
  GgufWriter writer = ModelWriter("gemma2", 4);
  writer.AddUint32("gemma2.attention.sliding_window", 512);
  writer.AddRaw("gemma2.attn_logit_softcapping", gguf::test::kFloat32, ByteWriter().F32(50.0f));
  writer.AddRaw("gemma2.final_logit_softcapping", gguf::test::kFloat32, ByteWriter().F32(30.0f));
  absl::StatusOr<ModelConfig> config = ConfigOf(writer);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_DOUBLE_EQ(config->embedding_scale, 8.0);  // sqrt(64)
  EXPECT_TRUE(config->post_norms);
  EXPECT_TRUE(config->gelu_ffn);
  EXPECT_FALSE(config->qk_norm);
  EXPECT_DOUBLE_EQ(config->attention_scale, 0.25);  // 1 / sqrt(head_dim 16)
  EXPECT_DOUBLE_EQ(config->attention_softcap, 50.0);
  EXPECT_DOUBLE_EQ(config->final_logit_softcap, 30.0);
  // Even layers local, odd ones global, as llama.cpp's and transformers' Gemma 2.
  EXPECT_EQ(config->layer_windows, std::vector<int64_t>({512, 0, 512, 0}));
  EXPECT_DOUBLE_EQ(config->local_rope_theta, config->rope_theta);
}

TEST(GgufModelConfigTest, Gemma2WithoutItsKeysTakesLlamaCppsDefaults) {
  GgufWriter writer = ModelWriter("gemma2");
  absl::StatusOr<ModelConfig> config = ConfigOf(writer);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_DOUBLE_EQ(config->attention_softcap, 50.0);
  EXPECT_DOUBLE_EQ(config->final_logit_softcap, 30.0);
  EXPECT_EQ(config->layer_windows, std::vector<int64_t>({4096, 0}));
}

TEST(GgufModelConfigTest, ANegativeSoftCapIsRefusedNamingIt) {
  GgufWriter writer = ModelWriter("gemma2");
  writer.AddRaw("gemma2.final_logit_softcapping", gguf::test::kFloat32, ByteWriter().F32(-1.0f));
  EXPECT_THAT(ConfigOf(writer).status().message(),
              HasSubstr("m.gguf: the final logit soft cap must be positive and finite (or 0 for none), got -1"));
}

TEST(GgufModelConfigTest, AnUnknownArchitectureIsNamedWithTheSupportedOnes) {
  EXPECT_THAT(ConfigOf(ModelWriter("gemma4")).status().message(),
              HasSubstr("general.architecture 'gemma4' is not supported (llama, qwen2, qwen3, phi3, gemma2, gemma3)"));
}

TEST(GgufModelConfigTest, AQwen3WithoutItsQNormIsRefusedNamingBoth) {
  ModelConfig config = TinyGqaConfig();
  InMemoryWeights weights = RandomWeightsFor(config, 3);
  config.architecture = "qwen3";
  config.qkv_bias = false;
  config.qk_norm = true;
  mlir::MLIRContext context;
  auto module = BuildDecoderModule(context, config, weights);
  ASSERT_FALSE(module.ok());
  EXPECT_THAT(std::string(module.status().message()),
              HasSubstr("tensor 'blk.0.attn_q_norm.weight' is missing (the qwen3 architecture needs it)"));
}

}  // namespace
}  // namespace kvjit::model
