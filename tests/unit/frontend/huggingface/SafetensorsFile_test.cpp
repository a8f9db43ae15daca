#include "frontend/huggingface/SafetensorsFile.h"

#include <cstring>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/frontend/huggingface/SafetensorsTestFiles.h"

namespace kvjit::safetensors {
namespace {

using ::kvjit::safetensors::testing::ErrorMessage;
using ::kvjit::safetensors::testing::F32Bytes;
using ::kvjit::safetensors::testing::SafetensorsWithHeader;
using ::kvjit::safetensors::testing::SerializeSafetensors;
using ::kvjit::safetensors::testing::TempDir;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

std::string AsString(absl::Span<const uint8_t> bytes) {
  return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

TEST(SafetensorsFileTest, ReadsTensorsOfEachDtypeWithMetadata) {
  TempDir dir;
  std::string weight = F32Bytes({1, 2, 3, 4, 5, 6});
  std::string half("\x00\x3c\x00\x40", 4);  // f16 1.0, 2.0
  std::string bf16_scalar("\x80\x3f", 2);   // bf16 1.0
  std::string path = dir.WriteFile("model.safetensors",
                                   SerializeSafetensors({{"layer.weight", "F32", {2, 3}, weight},
                                                         {"layer.bias", "F16", {2}, half},
                                                         {"scale", "BF16", {}, bf16_scalar}},
                                                        {{"format", "pt"}}));

  absl::StatusOr<SafetensorsFile> file = SafetensorsFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->path(), path);
  EXPECT_EQ(file->metadata().at("format"), "pt");
  ASSERT_EQ(file->tensors().size(), 3u);

  const Tensor* tensor = file->Find("layer.weight");
  ASSERT_NE(tensor, nullptr);
  EXPECT_EQ(tensor->name, "layer.weight");
  EXPECT_THAT(tensor->dims, ElementsAre(2, 3));
  EXPECT_EQ(tensor->storage_type, quant::StorageType::kF32);
  EXPECT_EQ(AsString(tensor->data), weight);

  tensor = file->Find("layer.bias");
  ASSERT_NE(tensor, nullptr);
  EXPECT_EQ(tensor->storage_type, quant::StorageType::kF16);
  EXPECT_EQ(AsString(tensor->data), half);

  tensor = file->Find("scale");
  ASSERT_NE(tensor, nullptr);
  EXPECT_EQ(tensor->storage_type, quant::StorageType::kBF16);
  EXPECT_THAT(tensor->dims, IsEmpty());
  EXPECT_EQ(AsString(tensor->data), bf16_scalar);
}

TEST(SafetensorsFileTest, ListsTensorsInDataOrder) {
  TempDir dir;
  std::string path = dir.WriteFile("m.safetensors",
                                   SerializeSafetensors({{"z_first", "F32", {1}, F32Bytes({1})},
                                                         {"a_second", "F32", {1}, F32Bytes({2})}}));
  absl::StatusOr<SafetensorsFile> file = SafetensorsFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  ASSERT_EQ(file->tensors().size(), 2u);
  EXPECT_EQ(file->tensors()[0].name, "z_first");
  EXPECT_EQ(file->tensors()[1].name, "a_second");
}

TEST(SafetensorsFileTest, AcceptsEmptyTensorsAndNoTensors) {
  TempDir dir;
  std::string path = dir.WriteFile(
      "m.safetensors",
      SerializeSafetensors({{"empty", "F32", {0, 4}, ""}, {"one", "F32", {1}, F32Bytes({1})}}));
  absl::StatusOr<SafetensorsFile> file = SafetensorsFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_TRUE(file->Find("empty")->data.empty());

  path = dir.WriteFile("none.safetensors", SerializeSafetensors({}));
  file = SafetensorsFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_THAT(file->tensors(), IsEmpty());
}

TEST(SafetensorsFileTest, TensorDataSurvivesMovingTheFile) {
  TempDir dir;
  std::string path =
      dir.WriteFile("m.safetensors", SerializeSafetensors({{"w", "F32", {2}, F32Bytes({7, 8})}}));
  absl::StatusOr<SafetensorsFile> opened = SafetensorsFile::Open(path);
  ASSERT_TRUE(opened.ok()) << opened.status();
  SafetensorsFile moved = *std::move(opened);
  float values[2];
  std::memcpy(values, moved.Find("w")->data.data(), sizeof(values));
  EXPECT_EQ(values[0], 7.0f);
  EXPECT_EQ(values[1], 8.0f);
}

TEST(SafetensorsFileTest, GetNamesFileAndMissingTensor) {
  TempDir dir;
  std::string path =
      dir.WriteFile("m.safetensors", SerializeSafetensors({{"w", "F32", {1}, F32Bytes({1})}}));
  absl::StatusOr<SafetensorsFile> file = SafetensorsFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->Find("absent"), nullptr);
  absl::StatusOr<const Tensor*> tensor = file->Get("absent");
  EXPECT_EQ(tensor.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(ErrorMessage(tensor), HasSubstr(path));
  EXPECT_THAT(ErrorMessage(tensor), HasSubstr("'absent'"));
}

TEST(SafetensorsFileTest, MissingFileIsNotFound) {
  TempDir dir;
  absl::StatusOr<SafetensorsFile> file = SafetensorsFile::Open(dir.path() + "/nope.safetensors");
  EXPECT_EQ(file.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(ErrorMessage(file), HasSubstr("nope.safetensors"));
}

TEST(SafetensorsFileTest, DirectoryIsRefused) {
  TempDir dir;
  EXPECT_THAT(ErrorMessage(SafetensorsFile::Open(dir.path())), HasSubstr("not a regular file"));
}

// Each malformed image, and the words its error must contain.
struct MalformedCase {
  std::string test_name;
  std::string image;
  std::string expected_message;
};

// Names the case in failure output instead of dumping its bytes.
void PrintTo(const MalformedCase& test_case, std::ostream* out) { *out << test_case.test_name; }

class MalformedSafetensorsTest : public ::testing::TestWithParam<MalformedCase> {};

TEST_P(MalformedSafetensorsTest, IsRefusedWithMessage) {
  TempDir dir;
  std::string path = dir.WriteFile("bad.safetensors", GetParam().image);
  absl::StatusOr<SafetensorsFile> file = SafetensorsFile::Open(path);
  ASSERT_FALSE(file.ok());
  EXPECT_THAT(ErrorMessage(file), HasSubstr(path));
  EXPECT_THAT(ErrorMessage(file), HasSubstr(GetParam().expected_message));
}

std::string Image(absl::string_view header, size_t data_bytes = 0) {
  return SafetensorsWithHeader(header, std::string(data_bytes, '\0'));
}

std::string HeaderLengthOnly(uint64_t length) {
  std::string image;
  for (int i = 0; i < 8; ++i) image.push_back(static_cast<char>((length >> (8 * i)) & 0xff));
  return image + "{}";
}

INSTANTIATE_TEST_SUITE_P(
    AllCases, MalformedSafetensorsTest,
    ::testing::Values(
        MalformedCase{"Empty", "", "shorter than the 8-byte header length"},
        MalformedCase{"FiveBytes", std::string("\x02\0\0\0\0", 5),
                      "shorter than the 8-byte header length"},
        MalformedCase{"HeaderPastEnd", HeaderLengthOnly(100), "runs past the end of the file"},
        MalformedCase{"AbsurdHeaderLength", HeaderLengthOnly(uint64_t{1} << 40),
                      "exceeds the limit"},
        MalformedCase{"InvalidJson", Image("{\"w\": "), "invalid JSON"},
        MalformedCase{"HeaderNotObject", Image("[1, 2]"), "header must be a JSON object"},
        MalformedCase{"EntryNotObject", Image(R"({"w": 3})"), "tensor 'w' must be a JSON object"},
        MalformedCase{"MissingDtype", Image(R"({"w": {"shape": [1], "data_offsets": [0, 4]}})", 4),
                      "tensor 'w': missing string field 'dtype'"},
        MalformedCase{"MissingShape",
                      Image(R"({"w": {"dtype": "F32", "data_offsets": [0, 4]}})", 4),
                      "tensor 'w': missing array field 'shape'"},
        MalformedCase{"MissingOffsets", Image(R"({"w": {"dtype": "F32", "shape": [1]}})", 4),
                      "tensor 'w': missing field 'data_offsets'"},
        MalformedCase{"OneOffset",
                      Image(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0]}})", 4),
                      "tensor 'w': missing field 'data_offsets'"},
        MalformedCase{
            "UnsupportedDtype",
            Image(R"({"ids": {"dtype": "I64", "shape": [1], "data_offsets": [0, 8]}})", 8),
            "tensor 'ids': dtype I64 is not supported"},
        MalformedCase{"NegativeDim",
                      Image(R"({"w": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}})", 4),
                      "tensor 'w': shape must be a non-negative integer"},
        MalformedCase{
            "FractionalDim",
            Image(R"({"w": {"dtype": "F32", "shape": [1.5], "data_offsets": [0, 4]}})", 4),
            "tensor 'w': shape must be a non-negative integer"},
        MalformedCase{"ShapeOverflow",
                      Image(R"({"w": {"dtype": "F32", "shape": [4294967296, 4294967296],
                                      "data_offsets": [0, 4]}})",
                            4),
                      "tensor 'w': shape [4294967296, 4294967296...] overflows"},
        MalformedCase{"ByteSizeOverflow",
                      Image(R"({"w": {"dtype": "F32", "shape": [4611686018427387904],
                                      "data_offsets": [0, 4]}})",
                            4),
                      "overflows in bytes"},
        MalformedCase{"NegativeOffset",
                      Image(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [-4, 0]}})", 4),
                      "tensor 'w': data_offsets begin must be a non-negative integer"},
        MalformedCase{"BeginAfterEnd",
                      Image(R"({"w": {"dtype": "F32", "shape": [0], "data_offsets": [4, 0]}})", 4),
                      "tensor 'w': data_offsets begin 4 is after end 0"},
        MalformedCase{"OffsetsPastData",
                      Image(R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})", 4),
                      "tensor 'w': data_offsets end 8 is past the data section (4 bytes)"},
        MalformedCase{
            "SizeMismatch",
            Image(R"({"w": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 16]}})", 24),
            "tensor 'w': data_offsets span 16 bytes but shape [2, 3] of F32 needs 24"},
        MalformedCase{"Overlap",
                      Image(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                                "b": {"dtype": "F16", "shape": [2], "data_offsets": [6, 10]}})",
                            12),
                      "tensors 'a' [0, 8) and 'b' [6, 10) overlap"},
        MalformedCase{"SameRange",
                      Image(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
                                "b": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})",
                            4),
                      "overlap"},
        MalformedCase{"MetadataNotStrings", Image(R"({"__metadata__": {"format": 1}})"),
                      "__metadata__ entry 'format' must be a string"}),
    [](const ::testing::TestParamInfo<MalformedCase>& info) { return info.param.test_name; });

}  // namespace
}  // namespace kvjit::safetensors
