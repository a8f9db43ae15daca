// A Hugging Face checkpoint (config.json + safetensors, rotate-half Q/K rows)
// imports to the same logits as the GGUF layout of the same weights (rows
// permuted to interleaved pairs, as llama.cpp's converter writes them).

#include <random>

#include "frontend/model/HfModel.h"
#include "frontend/model/LlamaBuilder.h"
#include "frontend/model/ModelFile.h"
#include "frontend/model/ReferenceWeights.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/Reference/ReferenceGeneration.h"
#include "tests/unit/common/NumericCompare.h"
#include "tests/unit/frontend/model/InMemoryWeights.h"
#include "tests/unit/frontend/safetensors/SafetensorsTestFiles.h"
#include "tools/registration/KvjitRegistration.h"

namespace kvjit::model {
namespace {

using ::kvjit::testing::Absolute;
using ::kvjit::testing::AllClose;
using ::kvjit::testing::Relative;
using ::testing::HasSubstr;
using safetensors::testing::F32Bytes;
using safetensors::testing::TempDir;
using safetensors::testing::TensorSpec;

constexpr char kLlamaConfig[] = R"({
  "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_act": "silu",
  "hidden_size": 16, "intermediate_size": 24, "num_hidden_layers": 2,
  "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 64,
  "vocab_size": 40, "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "tie_word_embeddings": false
})";

// llama.cpp's converter: within each head, row 2i+j of the GGUF tensor is row
// j·(head_dim/2) + i of the Hugging Face one.
std::vector<float> PermuteToInterleaved(const std::vector<float>& rows, int64_t heads,
                                        int64_t head_dim, int64_t columns) {
  std::vector<float> out(rows.size());
  for (int64_t h = 0; h < heads; ++h) {
    for (int64_t i = 0; i < head_dim / 2; ++i) {
      for (int64_t j = 0; j < 2; ++j) {
        const int64_t to = h * head_dim + 2 * i + j;
        const int64_t from = h * head_dim + j * (head_dim / 2) + i;
        std::copy_n(rows.begin() + from * columns, columns, out.begin() + to * columns);
      }
    }
  }
  return out;
}

class HfImportTest : public ::testing::Test {
 protected:
  HfImportTest() {
    mlir::DialectRegistry registry;
    RegisterKvjitDialects(registry);
    context_.appendDialectRegistry(registry);
  }

  absl::StatusOr<reference::RefTensor> Logits(const ModelConfig& config,
                                              const WeightSource& weights) {
    auto module = BuildLlamaModule(context_, config, weights);
    if (!module.ok()) return module.status();
    ReferenceWeights provider(weights);
    reference::ReferenceEvaluator evaluator(**module, provider);
    return reference::EvaluateLogits(evaluator, kForwardFunctionName, {5, 9, 2, 33, 17, 0});
  }

  mlir::MLIRContext context_;
};

TEST_F(HfImportTest, RotateHalfCheckpointMatchesInterleavedGgufLayout) {
  TempDir dir;
  dir.WriteFile("config.json", kLlamaConfig);
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 0.3f);
  auto random = [&](int64_t count) {
    std::vector<float> values(count);
    for (float& v : values) v = normal(rng);
    return values;
  };
  std::vector<TensorSpec> specs;
  InMemoryWeights gguf_layout;
  auto add = [&](const std::string& hf_name, std::vector<int64_t> shape,
                 std::vector<float> permuted_for_gguf = {}) {
    int64_t count = 1;
    for (int64_t d : shape) count *= d;
    std::vector<float> values = random(count);
    specs.push_back({hf_name, "F32", shape, F32Bytes(values)});
    gguf_layout.Add(CanonicalWeightName(hf_name), shape, values);
    return values;
  };
  add("model.embed_tokens.weight", {40, 16});
  add("model.norm.weight", {16});
  add("lm_head.weight", {40, 16});
  for (int layer = 0; layer < 2; ++layer) {
    const std::string p = "model.layers." + std::to_string(layer) + ".";
    add(p + "input_layernorm.weight", {16});
    add(p + "post_attention_layernorm.weight", {16});
    add(p + "self_attn.o_proj.weight", {16, 16});
    add(p + "self_attn.v_proj.weight", {8, 16});
    add(p + "mlp.gate_proj.weight", {24, 16});
    add(p + "mlp.up_proj.weight", {24, 16});
    add(p + "mlp.down_proj.weight", {16, 24});
    std::vector<float> q = add(p + "self_attn.q_proj.weight", {16, 16});
    std::vector<float> k = add(p + "self_attn.k_proj.weight", {8, 16});
    gguf_layout.Remove("blk." + std::to_string(layer) + ".attn_q.weight");
    gguf_layout.Remove("blk." + std::to_string(layer) + ".attn_k.weight");
    gguf_layout.Add("blk." + std::to_string(layer) + ".attn_q.weight", {16, 16},
                    PermuteToInterleaved(q, 4, 4, 16));
    gguf_layout.Add("blk." + std::to_string(layer) + ".attn_k.weight", {8, 16},
                    PermuteToInterleaved(k, 2, 4, 16));
  }
  dir.WriteFile("model.safetensors", safetensors::testing::SerializeSafetensors(specs));

  auto model = OpenModelFile(dir.path());
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(model->config.rope_style, RopeStyle::kNeox);
  EXPECT_EQ(model->config.num_kv_heads, 2);
  auto from_hf = Logits(model->config, *model->weights);
  ASSERT_TRUE(from_hf.ok()) << from_hf.status();

  ModelConfig gguf_config = model->config;
  gguf_config.rope_style = RopeStyle::kInterleaved;
  auto from_gguf = Logits(gguf_config, gguf_layout);
  ASSERT_TRUE(from_gguf.ok()) << from_gguf.status();
  EXPECT_TRUE(AllClose(from_hf->values, from_gguf->values, Absolute(1e-5) + Relative(1e-5)));
}

TEST_F(HfImportTest, ChatTemplateComesFromTokenizerConfig) {
  TempDir dir;
  dir.WriteFile("config.json", kLlamaConfig);
  dir.WriteFile("model.safetensors", safetensors::testing::SerializeSafetensors(
                                         {{"model.norm.weight", "F32", {16}, F32Bytes(std::vector<float>(16))}}));
  auto model = OpenModelFile(dir.path());
  ASSERT_TRUE(model.ok()) << model.status();
  auto none = LoadChatTemplate(*model);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ(*none, "");
  dir.WriteFile("tokenizer_config.json", R"({"chat_template": "<|im_start|>{{ x }}"})");
  auto chat_template = LoadChatTemplate(*model);
  ASSERT_TRUE(chat_template.ok()) << chat_template.status();
  EXPECT_EQ(*chat_template, "<|im_start|>{{ x }}");
  dir.WriteFile("tokenizer_config.json", R"({"chat_template": [{"name": "default"}]})");
  auto several = LoadChatTemplate(*model);
  ASSERT_FALSE(several.ok());
  EXPECT_THAT(std::string(several.status().message()),
              HasSubstr("chat_template is not a single template string"));
}

TEST_F(HfImportTest, CanonicalNames) {
  EXPECT_EQ(CanonicalWeightName("model.layers.12.mlp.down_proj.weight"), "blk.12.ffn_down.weight");
  EXPECT_EQ(CanonicalWeightName("model.layers.0.self_attn.k_proj.bias"), "blk.0.attn_k.bias");
  EXPECT_EQ(CanonicalWeightName("model.embed_tokens.weight"), "token_embd.weight");
  EXPECT_EQ(CanonicalWeightName("model.layers.0.rotary_emb.inv_freq"),
            "model.layers.0.rotary_emb.inv_freq");
}

TEST_F(HfImportTest, MissingShardTensorIsNamed) {
  TempDir dir;
  dir.WriteFile("config.json", kLlamaConfig);
  dir.WriteFile("model.safetensors", safetensors::testing::SerializeSafetensors(
                                         {{"model.norm.weight", "F32", {16}, F32Bytes(std::vector<float>(16))}}));
  auto model = OpenModelFile(dir.path());
  ASSERT_TRUE(model.ok()) << model.status();
  auto module = BuildLlamaModule(context_, model->config, *model->weights);
  ASSERT_FALSE(module.ok());
  EXPECT_THAT(std::string(module.status().message()),
              HasSubstr("tensor 'output.weight' is missing and the model does not tie its "
                        "embeddings"));
}

}  // namespace
}  // namespace kvjit::model
