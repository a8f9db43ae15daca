#include "frontend/huggingface/SafetensorsModel.h"

#include <ostream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/frontend/huggingface/SafetensorsTestFiles.h"

namespace kvjit::safetensors {
namespace {

using ::kvjit::safetensors::testing::ErrorMessage;
using ::kvjit::safetensors::testing::F32Bytes;
using ::kvjit::safetensors::testing::SerializeSafetensors;
using ::kvjit::safetensors::testing::TempDir;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr char kTwoShardIndex[] = R"({
  "metadata": {"total_size": 16},
  "weight_map": {
    "model.embed_tokens.weight": "model-00001-of-00002.safetensors",
    "model.norm.weight": "model-00001-of-00002.safetensors",
    "lm_head.weight": "model-00002-of-00002.safetensors"
  }
})";

void WriteTwoShards(const TempDir& dir) {
  dir.WriteFile(
      "model-00001-of-00002.safetensors",
      SerializeSafetensors({{"model.embed_tokens.weight", "F32", {2, 1}, F32Bytes({1, 2})},
                            {"model.norm.weight", "F32", {1}, F32Bytes({3})}}));
  dir.WriteFile("model-00002-of-00002.safetensors",
                SerializeSafetensors({{"lm_head.weight", "F32", {1}, F32Bytes({4})}}));
}

TEST(SafetensorsModelTest, OpensSingleFile) {
  TempDir dir;
  dir.WriteFile("model.safetensors",
                SerializeSafetensors({{"model.norm.weight", "F32", {2}, F32Bytes({1, 2})}}));
  absl::StatusOr<SafetensorsModel> model = SafetensorsModel::Open(dir.path());
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(model->shards().size(), 1u);
  EXPECT_THAT(model->TensorNames(), ElementsAre("model.norm.weight"));
  absl::StatusOr<const Tensor*> tensor = model->Get("model.norm.weight");
  ASSERT_TRUE(tensor.ok()) << tensor.status();
  EXPECT_THAT((*tensor)->dims, ElementsAre(2));
}

TEST(SafetensorsModelTest, OpensShardsNamedByIndexAndLooksUpAcrossThem) {
  TempDir dir;
  WriteTwoShards(dir);
  dir.WriteFile("model.safetensors.index.json", kTwoShardIndex);
  absl::StatusOr<SafetensorsModel> model = SafetensorsModel::Open(dir.path());
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(model->shards().size(), 2u);
  EXPECT_THAT(model->TensorNames(),
              ElementsAre("lm_head.weight", "model.embed_tokens.weight", "model.norm.weight"));
  const Tensor* head = model->Find("lm_head.weight");
  ASSERT_NE(head, nullptr);
  EXPECT_EQ(head->data.size(), 4u);
  const Tensor* embedding = model->Find("model.embed_tokens.weight");
  ASSERT_NE(embedding, nullptr);
  EXPECT_THAT(embedding->dims, ElementsAre(2, 1));
}

TEST(SafetensorsModelTest, PrefersSingleFileOverIndex) {
  TempDir dir;
  dir.WriteFile("model.safetensors", SerializeSafetensors({{"only", "F32", {1}, F32Bytes({1})}}));
  dir.WriteFile("model.safetensors.index.json", kTwoShardIndex);
  absl::StatusOr<SafetensorsModel> model = SafetensorsModel::Open(dir.path());
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_THAT(model->TensorNames(), ElementsAre("only"));
}

TEST(SafetensorsModelTest, MissingTensorErrorNamesDirectoryAndTensor) {
  TempDir dir;
  WriteTwoShards(dir);
  dir.WriteFile("model.safetensors.index.json", kTwoShardIndex);
  absl::StatusOr<SafetensorsModel> model = SafetensorsModel::Open(dir.path());
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(model->Find("model.layers.0.mlp.up_proj.weight"), nullptr);
  absl::StatusOr<const Tensor*> tensor = model->Get("model.layers.0.mlp.up_proj.weight");
  EXPECT_EQ(tensor.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(ErrorMessage(tensor), HasSubstr(dir.path()));
  EXPECT_THAT(ErrorMessage(tensor), HasSubstr("'model.layers.0.mlp.up_proj.weight'"));
}

TEST(SafetensorsModelTest, EmptyDirectoryIsNotFound) {
  TempDir dir;
  absl::StatusOr<SafetensorsModel> model = SafetensorsModel::Open(dir.path());
  EXPECT_EQ(model.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(ErrorMessage(model),
              HasSubstr("neither model.safetensors nor model.safetensors.index.json"));
}

TEST(SafetensorsModelTest, MissingShardIsNamed) {
  TempDir dir;
  dir.WriteFile(
      "model-00001-of-00002.safetensors",
      SerializeSafetensors({{"model.embed_tokens.weight", "F32", {2, 1}, F32Bytes({1, 2})},
                            {"model.norm.weight", "F32", {1}, F32Bytes({3})}}));
  dir.WriteFile("model.safetensors.index.json", kTwoShardIndex);
  absl::StatusOr<SafetensorsModel> model = SafetensorsModel::Open(dir.path());
  EXPECT_EQ(model.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(ErrorMessage(model), HasSubstr("model-00002-of-00002.safetensors"));
}

TEST(SafetensorsModelTest, TensorAbsentFromItsShardIsNamed) {
  TempDir dir;
  WriteTwoShards(dir);
  dir.WriteFile("model.safetensors.index.json", R"({"weight_map": {
      "lm_head.weight": "model-00002-of-00002.safetensors",
      "model.norm.weight": "model-00002-of-00002.safetensors"}})");
  EXPECT_THAT(ErrorMessage(SafetensorsModel::Open(dir.path())),
              HasSubstr("weight_map places tensor 'model.norm.weight' in "
                        "model-00002-of-00002.safetensors, which does not hold it"));
}

TEST(SafetensorsModelTest, TensorInTwoShardsIsRefused) {
  TempDir dir;
  dir.WriteFile("a.safetensors", SerializeSafetensors({{"w", "F32", {1}, F32Bytes({1})}}));
  dir.WriteFile("b.safetensors", SerializeSafetensors({{"w", "F32", {1}, F32Bytes({2})},
                                                       {"v", "F32", {1}, F32Bytes({3})}}));
  dir.WriteFile("model.safetensors.index.json",
                R"({"weight_map": {"w": "a.safetensors", "v": "b.safetensors"}})");
  EXPECT_THAT(ErrorMessage(SafetensorsModel::Open(dir.path())),
              HasSubstr("tensor 'w' appears in both"));
}

TEST(SafetensorsModelTest, MalformedShardErrorNamesShard) {
  TempDir dir;
  dir.WriteFile("a.safetensors", "junk");
  dir.WriteFile("model.safetensors.index.json", R"({"weight_map": {"w": "a.safetensors"}})");
  std::string message = ErrorMessage(SafetensorsModel::Open(dir.path()));
  EXPECT_THAT(message, HasSubstr("a.safetensors"));
  EXPECT_THAT(message, HasSubstr("shorter than the 8-byte header length"));
}

struct BadIndexCase {
  std::string test_name;
  std::string index;
  std::string expected_message;
};

// Names the case in failure output instead of dumping its bytes.
void PrintTo(const BadIndexCase& test_case, std::ostream* out) { *out << test_case.test_name; }

class BadIndexTest : public ::testing::TestWithParam<BadIndexCase> {};

TEST_P(BadIndexTest, IsRefusedWithMessage) {
  TempDir dir;
  dir.WriteFile("model.safetensors.index.json", GetParam().index);
  std::string message = ErrorMessage(SafetensorsModel::Open(dir.path()));
  EXPECT_THAT(message, HasSubstr("model.safetensors.index.json"));
  EXPECT_THAT(message, HasSubstr(GetParam().expected_message));
}

INSTANTIATE_TEST_SUITE_P(
    AllCases, BadIndexTest,
    ::testing::Values(
        BadIndexCase{"InvalidJson", "{", "invalid JSON"},
        BadIndexCase{"NotObject", "[]", "missing object field 'weight_map'"},
        BadIndexCase{"NoWeightMap", R"({"metadata": {}})", "missing object field 'weight_map'"},
        BadIndexCase{"EmptyWeightMap", R"({"weight_map": {}})", "weight_map is empty"},
        BadIndexCase{"ShardNotString", R"({"weight_map": {"w": 1}})",
                     "weight_map entry 'w' must be a file name string"},
        BadIndexCase{"ShardWithPath", R"({"weight_map": {"w": "../elsewhere.safetensors"}})",
                     "names shard '../elsewhere.safetensors', which is not a plain file name"}),
    [](const ::testing::TestParamInfo<BadIndexCase>& info) { return info.param.test_name; });

}  // namespace
}  // namespace kvjit::safetensors
