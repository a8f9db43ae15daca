// A hyper-parameter is described once: its GGUF key, its config.json field
// and each family's default, which holds for both formats alike.

#include <memory>
#include <string>
#include <vector>

#include "frontend/arch/ArchRegistry.h"
#include "frontend/model/GgufModel.h"
#include "frontend/huggingface/HfConfig.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/unit/frontend/gguf/GgufTestWriter.h"

namespace kvjit::arch {
namespace {

using gguf::test::ByteWriter;
using gguf::test::GgufWriter;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

const Family& FamilyOf(const char* gguf_architecture) {
  return **FamilyOfGgufArchitecture(gguf_architecture, "test");
}

// A two-layer model of `architecture`: hidden 64, 4 heads, vocabulary 10.
GgufWriter ModelWriter(const std::string& architecture) {
  GgufWriter writer;
  const std::string a = architecture + ".";
  writer.AddString("general.architecture", architecture)
      .AddUint32(a + "embedding_length", 64)
      .AddUint32(a + "feed_forward_length", 96)
      .AddUint32(a + "block_count", 2)
      .AddUint32(a + "attention.head_count", 4)
      .AddUint32(a + "context_length", 256)
      .AddRaw(a + "attention.layer_norm_rms_epsilon", gguf::test::kFloat32,
              ByteWriter().F32(1e-6f));
  std::vector<uint8_t> embedding(640 * sizeof(float));
  writer.AddTensor({"token_embd.weight", {64, 10}, /*ggml f32=*/0, embedding, std::nullopt});
  return writer;
}

absl::StatusOr<model::ModelConfig> GgufConfigOf(const GgufWriter& writer) {
  const std::vector<uint8_t> bytes = writer.Build();
  absl::StatusOr<std::unique_ptr<gguf::GgufFile>> file =
      gguf::GgufFile::FromBuffer("m.gguf", bytes);
  if (!file.ok()) return file.status();
  return model::ModelConfigFromGguf(**file);
}

// The same model as a config.json of `model_type`.
nlohmann::json ConfigJson(const std::string& model_type, const std::string& activation) {
  return {{"model_type", model_type},       {"hidden_act", activation},
          {"hidden_size", 64},              {"intermediate_size", 96},
          {"num_hidden_layers", 2},         {"num_attention_heads", 4},
          {"max_position_embeddings", 256}, {"vocab_size", 10},
          {"rms_norm_eps", 1e-6}};
}

std::string ErrorOf(const absl::Status& status) { return std::string(status.message()); }

TEST(HyperParameterTest, AFamilysDefaultHoldsInBothFormats) {
  const Family& gemma2 = FamilyOf("gemma2");
  for (Format format : {Format::kGguf, Format::kConfigJson}) {
    EXPECT_EQ(gemma2.DefaultOf(Param::kSlidingWindow, format), 4096.0);
    EXPECT_EQ(gemma2.DefaultOf(Param::kAttentionSoftcap, format), 50.0);
    EXPECT_EQ(gemma2.DefaultOf(Param::kFinalLogitSoftcap, format), 30.0);
  }
}

TEST(HyperParameterTest, TheCommonDefaultHoldsWhereTheFamilyStatesNone) {
  const Family& llama = FamilyOf("llama");
  EXPECT_EQ(llama.DefaultOf(Param::kRopeTheta, Format::kGguf), 10000.0);
  EXPECT_EQ(llama.DefaultOf(Param::kAttentionSoftcap, Format::kConfigJson), 0.0);
  EXPECT_EQ(llama.DefaultOf(Param::kHiddenSize, Format::kGguf), std::nullopt);
  EXPECT_EQ(Describe(Param::kHiddenSize).gguf_key, "embedding_length");
  EXPECT_EQ(Describe(Param::kHiddenSize).config_field, "hidden_size");
}

// transformers' class defaults, which a multimodal config.json's
// text_config leaves out; a GGUF always has these keys.
TEST(HyperParameterTest, AConfigJsonOnlyDefaultLeavesGgufTheCommonOne) {
  const Family& gemma3 = FamilyOf("gemma3");
  EXPECT_EQ(gemma3.DefaultOf(Param::kHiddenSize, Format::kConfigJson), 2304.0);
  EXPECT_EQ(gemma3.DefaultOf(Param::kHiddenSize, Format::kGguf), std::nullopt);
  EXPECT_EQ(gemma3.DefaultOf(Param::kRopeTheta, Format::kConfigJson), 1e6);
  EXPECT_EQ(gemma3.DefaultOf(Param::kRopeTheta, Format::kGguf), 10000.0);
}

TEST(HyperParameterTest, TheDefaultAppliesWhereNeitherFileGivesTheKey) {
  absl::StatusOr<model::ModelConfig> from_gguf = GgufConfigOf(ModelWriter("gemma2"));
  ASSERT_TRUE(from_gguf.ok()) << from_gguf.status();
  EXPECT_THAT(from_gguf->layer_windows, ElementsAre(4096, 0));
  EXPECT_DOUBLE_EQ(from_gguf->attention_softcap, 50.0);
  EXPECT_DOUBLE_EQ(from_gguf->final_logit_softcap, 30.0);

  absl::StatusOr<hf::DecoderConfig> from_json =
      hf::ParseDecoderConfig(ConfigJson("gemma2", "gelu_pytorch_tanh").dump());
  ASSERT_TRUE(from_json.ok()) << from_json.status();
  EXPECT_THAT(from_json->layer_windows, ElementsAre(4096, 0));
  EXPECT_DOUBLE_EQ(from_json->attn_logit_softcapping, 50.0);
  EXPECT_DOUBLE_EQ(from_json->final_logit_softcapping, 30.0);
}

TEST(HyperParameterTest, AWindowOfOneIsTakenAndOneBelowIsRefused) {
  GgufWriter one = ModelWriter("llama");
  one.AddUint32("llama.attention.sliding_window", 1);
  absl::StatusOr<model::ModelConfig> from_gguf = GgufConfigOf(one);
  ASSERT_TRUE(from_gguf.ok()) << from_gguf.status();
  EXPECT_THAT(from_gguf->layer_windows, ElementsAre(1, 1));
  GgufWriter negative = ModelWriter("llama");
  negative.AddRaw("llama.attention.sliding_window", gguf::test::kInt32, ByteWriter().U32(~0u));
  EXPECT_THAT(ErrorOf(GgufConfigOf(negative).status()),
              HasSubstr("m.gguf: a sliding window must be positive, got -1"));

  nlohmann::json json = ConfigJson("mistral", "silu");
  json["sliding_window"] = 1;
  absl::StatusOr<hf::DecoderConfig> from_json = hf::ParseDecoderConfig(json.dump());
  ASSERT_TRUE(from_json.ok()) << from_json.status();
  EXPECT_THAT(from_json->layer_windows, ElementsAre(1, 1));
  json["sliding_window"] = 0;
  EXPECT_THAT(ErrorOf(hf::ParseDecoderConfig(json.dump()).status()),
              HasSubstr("config.json: sliding_window must be positive"));
}

TEST(HyperParameterTest, ASoftCapAtItsBoundIsNoneAndPastItRefused) {
  GgufWriter zero = ModelWriter("gemma2");
  zero.AddRaw("gemma2.final_logit_softcapping", gguf::test::kFloat32, ByteWriter().F32(0.0f));
  absl::StatusOr<model::ModelConfig> from_gguf = GgufConfigOf(zero);
  ASSERT_TRUE(from_gguf.ok()) << from_gguf.status();
  EXPECT_DOUBLE_EQ(from_gguf->final_logit_softcap, 0.0);
  GgufWriter negative = ModelWriter("gemma2");
  negative.AddRaw("gemma2.final_logit_softcapping", gguf::test::kFloat32,
                  ByteWriter().F32(-1.0f));
  EXPECT_THAT(ErrorOf(GgufConfigOf(negative).status()),
              HasSubstr("m.gguf: the final logit soft cap must be positive and finite (or 0 for "
                        "none), got -1"));

  nlohmann::json json = ConfigJson("gemma2", "gelu_pytorch_tanh");
  json["final_logit_softcapping"] = nullptr;
  absl::StatusOr<hf::DecoderConfig> from_json = hf::ParseDecoderConfig(json.dump());
  ASSERT_TRUE(from_json.ok()) << from_json.status();
  EXPECT_DOUBLE_EQ(from_json->final_logit_softcapping, 0.0);
  json["final_logit_softcapping"] = -1;
  EXPECT_THAT(ErrorOf(hf::ParseDecoderConfig(json.dump()).status()),
              HasSubstr("config.json: final_logit_softcapping must be a positive number"));
}

}  // namespace
}  // namespace kvjit::arch
