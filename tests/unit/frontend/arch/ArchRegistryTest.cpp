// The registry finds each family by every name the two file formats give it,
// and refuses other names listing the ones it knows.

#include "frontend/arch/ArchRegistry.h"

#include <set>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvjit::arch {
namespace {

using ::testing::HasSubstr;

TEST(ArchRegistryTest, FindsEachFamilyByItsGgufArchitecture) {
  for (const char* name : {"llama", "qwen2", "qwen3", "phi3", "gemma2", "gemma3"}) {
    absl::StatusOr<const Family*> family = FamilyOfGgufArchitecture(name, "m.gguf");
    ASSERT_TRUE(family.ok()) << family.status();
    EXPECT_EQ((*family)->name, name);
    EXPECT_EQ((*family)->architecture, name);
  }
}

TEST(ArchRegistryTest, FindsEachFamilyByItsModelType) {
  const std::pair<const char*, const char*> kFamilyOfType[] = {
      {"llama", "llama"}, {"mistral", "mistral"}, {"qwen2", "qwen2"},       {"qwen3", "qwen3"},
      {"phi3", "phi3"},   {"gemma2", "gemma2"},   {"gemma3_text", "gemma3"}};
  for (const auto& [model_type, name] : kFamilyOfType) {
    absl::StatusOr<const Family*> family = FamilyOfConfigModelType(model_type, "model_type");
    ASSERT_TRUE(family.ok()) << family.status();
    EXPECT_EQ((*family)->name, name);
  }
  // llama.cpp writes Mistral's GGUFs as llama; kvjit builds it as that.
  EXPECT_EQ((*FamilyOfConfigModelType("mistral", "model_type"))->architecture, "llama");
}

TEST(ArchRegistryTest, FindsAFamilyByAnArchitecturesEntry) {
  const Family* mistral = FindConfigArchitecture("MistralForCausalLM");
  ASSERT_NE(mistral, nullptr);
  EXPECT_EQ(mistral->name, "mistral");
  const Family* qwen2 = FindConfigArchitecture("Qwen2ForCausalLM");
  ASSERT_NE(qwen2, nullptr);
  EXPECT_EQ(qwen2->name, "qwen2");
  EXPECT_EQ(FindConfigArchitecture("GPT2LMHeadModel"), nullptr);
  EXPECT_EQ(FindConfigArchitecture(""), nullptr);
}

TEST(ArchRegistryTest, FindsTheFamilyOfAMultimodalModelType) {
  const Family* gemma3 = FindMultimodalModelType("gemma3");
  ASSERT_NE(gemma3, nullptr);
  EXPECT_EQ(gemma3->name, "gemma3");
  EXPECT_EQ(FindMultimodalModelType("llama"), nullptr);
  EXPECT_EQ(FindMultimodalModelType(""), nullptr);
}

TEST(ArchRegistryTest, AnUnknownGgufArchitectureIsRefusedListingTheKnownOnes) {
  absl::StatusOr<const Family*> family = FamilyOfGgufArchitecture("gpt2", "m.gguf");
  ASSERT_FALSE(family.ok());
  EXPECT_EQ(family.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(family.status().message(),
            "m.gguf: general.architecture 'gpt2' is not supported (llama, qwen2, qwen3, phi3, "
            "gemma2, gemma3)");
  // A config.json's model type is not a GGUF architecture.
  EXPECT_FALSE(FamilyOfGgufArchitecture("mistral", "m.gguf").ok());
}

TEST(ArchRegistryTest, AnUnknownModelTypeIsRefusedListingTheKnownOnes) {
  absl::StatusOr<const Family*> family =
      FamilyOfConfigModelType("gemma", "config.json: model_type");
  ASSERT_FALSE(family.ok());
  EXPECT_EQ(family.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(family.status().message(),
            "config.json: model_type 'gemma' is not supported (llama, mistral, qwen2, qwen3, phi3, "
            "gemma2, gemma3_text, gemma3 are)");
  // The multimodal wrapper is not itself a decoder's model type.
  EXPECT_FALSE(FamilyOfConfigModelType("gemma3", "model_type").ok());
}

// Two families claiming one name would make lookups depend on their order.
TEST(ArchRegistryTest, NoNameBelongsToTwoFamilies) {
  std::set<absl::string_view> names, gguf, model_types, architectures;
  std::set<int> listed;
  for (const Family* family : Families()) {
    SCOPED_TRACE(std::string(family->name));
    EXPECT_FALSE(family->architecture.empty());
    EXPECT_TRUE(names.insert(family->name).second);
    EXPECT_TRUE(listed.insert(family->listed).second);
    for (absl::string_view name : family->gguf_architectures) {
      EXPECT_TRUE(gguf.insert(name).second) << name;
    }
    for (absl::string_view name : family->config_model_types) {
      EXPECT_TRUE(model_types.insert(name).second) << name;
    }
    if (!family->multimodal_model_type.empty()) {
      EXPECT_FALSE(family->config_model_types.empty());
      EXPECT_TRUE(model_types.insert(family->multimodal_model_type).second);
    }
    for (absl::string_view name : family->config_architectures) {
      EXPECT_TRUE(architectures.insert(name).second) << name;
    }
  }
  EXPECT_EQ(names.size(), 7u);
}

}  // namespace
}  // namespace kvjit::arch
