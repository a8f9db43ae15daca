// A Hugging Face checkpoint (config.json + safetensors, rotate-half Q/K rows)
// imports to the same logits as the GGUF layout of the same weights (rows
// permuted to interleaved pairs, as llama.cpp's converter writes them).

#include <random>

#include "absl/strings/match.h"
#include "frontend/arch/ArchRegistry.h"
#include "frontend/model/HfModel.h"
#include "frontend/model/DecoderBuilder.h"
#include "frontend/model/ModelFile.h"
#include "frontend/model/ReferenceWeights.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ir/Reference/ReferenceGeneration.h"
#include "ir/Tfm/TfmOps.h"
#include "nlohmann/json.hpp"
#include "tests/unit/common/NumericCompare.h"
#include "tests/unit/frontend/model/InMemoryWeights.h"
#include "tests/unit/frontend/huggingface/SafetensorsTestFiles.h"
#include "passes/registration/KvjitRegistration.h"

namespace kvjit::model {
namespace {

using ::kvjit::testing::Absolute;
using ::kvjit::testing::AllClose;
using ::kvjit::testing::Relative;
using ::testing::HasSubstr;
using safetensors::testing::F32Bytes;
using safetensors::testing::TempDir;
using safetensors::testing::TensorSpec;

// The family a config.json's model_type names.
const arch::Family* Family(absl::string_view model_type) {
  return *arch::FamilyOfConfigModelType(model_type, "model_type");
}

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
    auto module = BuildDecoderModule(context_, config, weights);
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

// Gemma 3 as transformers 4 writes it; layer 0 slides, layer 1 is global.
constexpr char kGemma3Config[] = R"({
  "architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text",
  "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 16, "intermediate_size": 24,
  "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 4,
  "max_position_embeddings": 64, "vocab_size": 40, "rms_norm_eps": 1e-6,
  "rope_theta": 1000000.0, "rope_local_base_freq": 10000.0, "query_pre_attn_scalar": 8,
  "sliding_window": 3, "sliding_window_pattern": 2, "final_logit_softcapping": 5.0
})";

// Gemma's checkpoints store each norm weight as w for a scale of 1 + w; the
// import derives 1 + w (tfm.param ... shifted) for every norm and computes
// what the GGUF layout, the 1 folded in as llama.cpp's converter does, does.
TEST_F(HfImportTest, GemmaNormsOfOnePlusWMatchTheFoldedGgufLayout) {
  TempDir dir;
  dir.WriteFile("config.json", kGemma3Config);
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 0.3f);
  std::vector<TensorSpec> specs;
  InMemoryWeights gguf_layout;
  auto add = [&](const std::string& hf_name, std::vector<int64_t> shape) {
    int64_t count = 1;
    for (int64_t d : shape) count *= d;
    std::vector<float> values(count);
    for (float& v : values) v = normal(rng);
    specs.push_back({hf_name, "F32", shape, F32Bytes(values)});
    const std::string canonical = CanonicalWeightName(hf_name, Family("gemma3_text"));
    if (absl::StrContains(hf_name, "norm")) {
      for (float& v : values) v += 1.0f;
    }
    gguf_layout.Add(canonical, shape, values);
  };
  add("model.embed_tokens.weight", {40, 16});
  add("model.norm.weight", {16});
  for (int layer = 0; layer < 2; ++layer) {
    const std::string p = "model.layers." + std::to_string(layer) + ".";
    for (const char* norm : {"input_layernorm", "post_attention_layernorm",
                             "pre_feedforward_layernorm", "post_feedforward_layernorm"}) {
      add(p + norm + ".weight", {16});
    }
    add(p + "self_attn.q_norm.weight", {4});
    add(p + "self_attn.k_norm.weight", {4});
    add(p + "self_attn.q_proj.weight", {16, 16});
    add(p + "self_attn.k_proj.weight", {8, 16});
    add(p + "self_attn.v_proj.weight", {8, 16});
    add(p + "self_attn.o_proj.weight", {16, 16});
    add(p + "mlp.gate_proj.weight", {24, 16});
    add(p + "mlp.up_proj.weight", {24, 16});
    add(p + "mlp.down_proj.weight", {16, 24});
  }
  dir.WriteFile("model.safetensors", safetensors::testing::SerializeSafetensors(specs));

  auto model = OpenModelFile(dir.path());
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_TRUE(model->config.norm_weights_plus_one);
  EXPECT_EQ(model->config.global_layer_period, 2);
  EXPECT_EQ(model->config.layer_windows, (std::vector<int64_t>{3, 0}));
  auto module = BuildDecoderModule(context_, model->config, *model->weights);
  ASSERT_TRUE(module.ok()) << module.status();
  std::vector<std::string> shifted;
  for (auto param : (*module)->getOps<tfm::ParamOp>()) {
    if (!param.getShifted()) continue;
    EXPECT_EQ(param.getSymName().str(), param.getShifted()->str() + ".plus_one");
    EXPECT_EQ(param.getStorage(), tfm::StorageType::f32);
    shifted.push_back(param.getShifted()->str());
  }
  EXPECT_THAT(shifted, ::testing::UnorderedElementsAre(
                           "output_norm.weight", "blk.0.attn_norm.weight",
                           "blk.0.post_attention_norm.weight", "blk.0.ffn_norm.weight",
                           "blk.0.post_ffw_norm.weight", "blk.0.attn_q_norm.weight",
                           "blk.0.attn_k_norm.weight", "blk.1.attn_norm.weight",
                           "blk.1.post_attention_norm.weight", "blk.1.ffn_norm.weight",
                           "blk.1.post_ffw_norm.weight", "blk.1.attn_q_norm.weight",
                           "blk.1.attn_k_norm.weight"));
  auto from_hf = Logits(model->config, *model->weights);
  ASSERT_TRUE(from_hf.ok()) << from_hf.status();

  ModelConfig folded = model->config;
  folded.norm_weights_plus_one = false;
  auto from_gguf = Logits(folded, gguf_layout);
  ASSERT_TRUE(from_gguf.ok()) << from_gguf.status();
  EXPECT_TRUE(AllClose(from_hf->values, from_gguf->values, Absolute(1e-6) + Relative(1e-6)));
}

TEST_F(HfImportTest, GemmaLayerKindsMustRepeat) {
  nlohmann::json config = nlohmann::json::parse(kGemma3Config);
  config["num_hidden_layers"] = 3;
  config["layer_types"] = {"full_attention", "sliding_attention", "sliding_attention"};
  absl::StatusOr<hf::DecoderConfig> parsed = hf::ParseDecoderConfig(config.dump());
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  auto model_config = ModelConfigFromHf(*parsed, "config.json");
  ASSERT_FALSE(model_config.ok());
  EXPECT_THAT(std::string(model_config.status().message()),
              HasSubstr("config.json: layer_types does not repeat as n - 1 sliding_attention "
                        "layers and one full_attention layer"));
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
  // transformers 5 writes the template to chat_template.jinja, which wins.
  dir.WriteFile("chat_template.jinja", "{{ bos_token }}{% for m in messages %}\n{% endfor %}");
  auto from_jinja = LoadChatTemplate(*model);
  ASSERT_TRUE(from_jinja.ok()) << from_jinja.status();
  EXPECT_EQ(*from_jinja, "{{ bos_token }}{% for m in messages %}\n{% endfor %}");
}

TEST_F(HfImportTest, CanonicalNames) {
  EXPECT_EQ(CanonicalWeightName("model.layers.12.mlp.down_proj.weight"), "blk.12.ffn_down.weight");
  EXPECT_EQ(CanonicalWeightName("model.layers.0.self_attn.k_proj.bias"), "blk.0.attn_k.bias");
  EXPECT_EQ(CanonicalWeightName("model.embed_tokens.weight"), "token_embd.weight");
  EXPECT_EQ(CanonicalWeightName("model.layers.0.rotary_emb.inv_freq"),
            "model.layers.0.rotary_emb.inv_freq");
  EXPECT_EQ(CanonicalWeightName("model.layers.2.post_attention_layernorm.weight"),
            "blk.2.ffn_norm.weight");
}

// Gemma's post_attention_layernorm follows the attention; its MLP has a norm
// before and after; a multimodal Gemma 3 keeps its decoder under
// language_model (transformers 4) or model.language_model (transformers 5).
TEST_F(HfImportTest, GemmaCanonicalNames) {
  for (const arch::Family* type : {Family("gemma2"), Family("gemma3_text")}) {
    EXPECT_EQ(CanonicalWeightName("model.layers.2.post_attention_layernorm.weight", type),
              "blk.2.post_attention_norm.weight");
    EXPECT_EQ(CanonicalWeightName("model.layers.2.pre_feedforward_layernorm.weight", type),
              "blk.2.ffn_norm.weight");
    EXPECT_EQ(CanonicalWeightName("model.layers.2.post_feedforward_layernorm.weight", type),
              "blk.2.post_ffw_norm.weight");
    EXPECT_EQ(CanonicalWeightName("model.layers.2.input_layernorm.weight", type),
              "blk.2.attn_norm.weight");
  }
  const arch::Family* gemma3 = Family("gemma3_text");
  EXPECT_EQ(CanonicalWeightName("language_model.model.layers.1.self_attn.q_norm.weight", gemma3),
            "blk.1.attn_q_norm.weight");
  EXPECT_EQ(CanonicalWeightName("model.language_model.embed_tokens.weight", gemma3),
            "token_embd.weight");
  EXPECT_EQ(CanonicalWeightName("language_model.model.norm.weight", gemma3), "output_norm.weight");
  EXPECT_EQ(CanonicalWeightName("vision_tower.vision_model.post_layernorm.weight", gemma3),
            "vision_tower.vision_model.post_layernorm.weight");
}

TEST_F(HfImportTest, MissingShardTensorIsNamed) {
  TempDir dir;
  dir.WriteFile("config.json", kLlamaConfig);
  dir.WriteFile("model.safetensors", safetensors::testing::SerializeSafetensors(
                                         {{"model.norm.weight", "F32", {16}, F32Bytes(std::vector<float>(16))}}));
  auto model = OpenModelFile(dir.path());
  ASSERT_TRUE(model.ok()) << model.status();
  auto module = BuildDecoderModule(context_, model->config, *model->weights);
  ASSERT_FALSE(module.ok());
  EXPECT_THAT(std::string(module.status().message()),
              HasSubstr("tensor 'output.weight' is missing and the model does not tie its "
                        "embeddings"));
}

}  // namespace
}  // namespace kvjit::model
