#include "frontend/gguf/GgufFile.h"

#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/quant/Dequantize.h"
#include "tests/unit/frontend/gguf/GgufTestWriter.h"

namespace kvjit::gguf {
namespace {

using ::testing::Each;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using test::ByteWriter;
using test::GgufWriter;

constexpr uint32_t kGgmlF32 = 0;
constexpr uint32_t kGgmlQ4_0 = 2;

std::vector<uint8_t> Iota(size_t size, uint8_t start) {
  std::vector<uint8_t> bytes(size);
  for (size_t i = 0; i < size; ++i) bytes[i] = static_cast<uint8_t>(start + i);
  return bytes;
}

// One pair of every value type, and arrays of several kinds.
GgufWriter MetadataWriter() {
  GgufWriter writer;
  writer.AddString("general.architecture", "llama")
      .AddRaw("u8", test::kUint8, ByteWriter().U8(250))
      .AddRaw("i8", test::kInt8, ByteWriter().U8(0x80))
      .AddRaw("u16", test::kUint16, ByteWriter().U16(65535))
      .AddRaw("i16", test::kInt16, ByteWriter().U16(0xfffe))
      .AddUint32("u32", 4000000000u)
      .AddRaw("i32", test::kInt32, ByteWriter().U32(static_cast<uint32_t>(-7)))
      .AddRaw("f32", test::kFloat32, ByteWriter().F32(1e-5f))
      .AddRaw("bool", test::kBool, ByteWriter().U8(1))
      .AddRaw("u64", test::kUint64, ByteWriter().U64(~uint64_t{0}))
      .AddRaw("i64", test::kInt64, ByteWriter().U64(static_cast<uint64_t>(int64_t{-5000000000})))
      .AddRaw("f64", test::kFloat64, ByteWriter().F64(10000.0))
      .AddStringArray("tokens", {"<s>", "a", ""})
      .AddRaw("scores", test::kArray, ByteWriter().U32(test::kFloat32).U64(2).F32(-1.5f).F32(2.0f))
      .AddRaw("scores64", test::kArray, ByteWriter().U32(test::kFloat64).U64(1).F64(0.25))
      .AddRaw("types", test::kArray, ByteWriter().U32(test::kInt32).U64(3).U32(1).U32(2).U32(static_cast<uint32_t>(-3)))
      .AddRaw("big", test::kArray, ByteWriter().U32(test::kUint64).U64(1).U64(~uint64_t{0}))
      .AddRaw("empty", test::kArray, ByteWriter().U32(test::kString).U64(0));
  return writer;
}

class GgufMetadataTest : public ::testing::Test {
 protected:
  void SetUp() override {
    bytes_ = MetadataWriter().Build();
    absl::StatusOr<std::unique_ptr<GgufFile>> file = GgufFile::FromBuffer("meta.gguf", bytes_);
    ASSERT_TRUE(file.ok()) << file.status();
    file_ = *std::move(file);
  }

  std::vector<uint8_t> bytes_;
  std::unique_ptr<GgufFile> file_;
};

TEST_F(GgufMetadataTest, Header) {
  EXPECT_EQ(file_->path(), "meta.gguf");
  EXPECT_EQ(file_->version(), 3u);
  EXPECT_EQ(file_->alignment(), 32u);
  EXPECT_TRUE(file_->tensors().empty());
  EXPECT_EQ(file_->data_offset() % 32, 0u);
}

TEST_F(GgufMetadataTest, EntriesInFileOrder) {
  std::vector<std::string> keys;
  for (const GgufMetadataEntry& entry : file_->metadata()) keys.emplace_back(entry.key);
  EXPECT_THAT(keys, ElementsAre("general.architecture", "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "u64",
                                "i64", "f64", "tokens", "scores", "scores64", "types", "big", "empty"));
  EXPECT_EQ(file_->metadata()[5].value.type(), GgufType::kUint32);
}

TEST_F(GgufMetadataTest, FindAndHas) {
  EXPECT_TRUE(file_->Has("u16"));
  EXPECT_FALSE(file_->Has("u17"));
  ASSERT_NE(file_->Find("i16"), nullptr);
  EXPECT_EQ(file_->Find("i16")->AsInt(), -2);
  EXPECT_EQ(file_->Find("missing"), nullptr);
}

TEST_F(GgufMetadataTest, ScalarGetters) {
  EXPECT_EQ(*file_->GetString("general.architecture"), "llama");
  EXPECT_EQ(*file_->GetUint("u8"), 250u);
  EXPECT_EQ(*file_->GetUint("u32"), 4000000000u);
  EXPECT_EQ(*file_->GetUint("u64"), ~uint64_t{0});
  EXPECT_EQ(*file_->GetInt("i8"), -128);
  EXPECT_EQ(*file_->GetInt("i32"), -7);
  EXPECT_EQ(*file_->GetInt("i64"), -5000000000);
  EXPECT_EQ(*file_->GetInt("u16"), 65535);
  EXPECT_EQ(*file_->GetFloat("f32"), static_cast<double>(1e-5f));
  EXPECT_EQ(*file_->GetFloat("f64"), 10000.0);
  EXPECT_TRUE(*file_->GetBool("bool"));
}

TEST_F(GgufMetadataTest, ArrayGetters) {
  EXPECT_THAT(*file_->GetStringArray("tokens"), ElementsAre("<s>", "a", ""));
  EXPECT_THAT(*file_->GetStringArray("empty"), ElementsAre());
  EXPECT_THAT(*file_->GetFloatArray("scores"), ElementsAre(-1.5f, 2.0f));
  EXPECT_THAT(*file_->GetFloatArray("scores64"), ElementsAre(0.25f));
  EXPECT_THAT(*file_->GetIntArray("types"), ElementsAre(1, 2, -3));
}

TEST_F(GgufMetadataTest, MissingKeyIsNotFound) {
  absl::StatusOr<uint64_t> value = file_->GetUint("llama.block_count");
  EXPECT_EQ(value.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(value.status().message(), HasSubstr("meta.gguf: key 'llama.block_count' is missing"));
}

TEST_F(GgufMetadataTest, WrongTypesNameFileKeyAndTypes) {
  EXPECT_THAT(file_->GetString("u32").status().message(),
              HasSubstr("meta.gguf: key 'u32' is of type uint32, not string"));
  EXPECT_THAT(file_->GetUint("f32").status().message(), HasSubstr("key 'f32' is of type float32, not an unsigned"));
  EXPECT_THAT(file_->GetUint("i32").status().message(), HasSubstr("key 'i32' is -7, not a non-negative integer"));
  EXPECT_THAT(file_->GetInt("u64").status().message(), HasSubstr("does not fit int64"));
  EXPECT_THAT(file_->GetInt("tokens").status().message(), HasSubstr("is of type array of string, not an integer"));
  EXPECT_THAT(file_->GetFloat("u8").status().message(), HasSubstr("key 'u8' is of type uint8"));
  EXPECT_THAT(file_->GetBool("u8").status().message(), HasSubstr("not bool"));
  EXPECT_THAT(file_->GetStringArray("scores").status().message(),
              HasSubstr("key 'scores' is of type array of float32, not array of string"));
  EXPECT_THAT(file_->GetStringArray("general.architecture").status().message(),
              HasSubstr("is of type string, not array of string"));
  EXPECT_THAT(file_->GetFloatArray("types").status().message(), HasSubstr("not array of float32 or float64"));
  EXPECT_THAT(file_->GetIntArray("tokens").status().message(), HasSubstr("not array of integers"));
  EXPECT_THAT(file_->GetIntArray("big").status().message(),
              HasSubstr("key 'big': element 0 is 18446744073709551615, which does not fit int64"));
  EXPECT_EQ(file_->GetString("u32").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(GgufFileTest, VersionTwoIsRead) {
  std::vector<uint8_t> bytes = GgufWriter().Version(2).AddUint32("x", 1).Build();
  absl::StatusOr<std::unique_ptr<GgufFile>> file = GgufFile::FromBuffer("v2.gguf", bytes);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ((*file)->version(), 2u);
}

TEST(GgufFileTest, TensorsAreLocatedAndTyped) {
  GgufWriter writer;
  writer.AddString("general.architecture", "llama");
  // A q4_0 tensor of 64 x 3 (two blocks per row) and an f32 one of 4 x 2 x 1.
  writer.AddTensor({"blk.0.attn_q.weight", {64, 3}, kGgmlQ4_0, Iota(2 * 18 * 3, 1), std::nullopt});
  writer.AddTensor({"output_norm.weight", {4, 2, 1}, kGgmlF32, Iota(4 * 2 * 4, 100), std::nullopt});
  std::vector<uint8_t> bytes = writer.Build();
  absl::StatusOr<std::unique_ptr<GgufFile>> file = GgufFile::FromBuffer("t.gguf", bytes);
  ASSERT_TRUE(file.ok()) << file.status();
  const GgufFile& gguf = **file;
  ASSERT_EQ(gguf.tensors().size(), 2u);

  const GgufTensor& q = gguf.tensors()[0];
  EXPECT_EQ(q.name, "blk.0.attn_q.weight");
  EXPECT_THAT(q.dims, ElementsAre(64, 3));
  EXPECT_EQ(q.type, quant::StorageType::kQ4_0);
  EXPECT_EQ(q.element_count(), 192);
  EXPECT_EQ(q.size_bytes, 108u);
  EXPECT_EQ(q.offset_in_data, 0u);
  EXPECT_EQ(q.file_offset, gguf.data_offset());
  EXPECT_EQ(q.data.data(), bytes.data() + q.file_offset);
  EXPECT_EQ(q.data.size(), 108u);
  EXPECT_EQ(q.data[0], 1);

  const GgufTensor* norm = gguf.FindTensor("output_norm.weight");
  ASSERT_NE(norm, nullptr);
  EXPECT_THAT(norm->dims, ElementsAre(4, 2, 1));
  EXPECT_EQ(norm->type, quant::StorageType::kF32);
  EXPECT_EQ(norm->offset_in_data, 128u);  // 108 rounded up to the alignment
  EXPECT_EQ(norm->file_offset, gguf.data_offset() + 128);
  EXPECT_EQ(norm->size_bytes, 32u);
  EXPECT_EQ(norm->data[31], 131);

  absl::StatusOr<const GgufTensor*> found = gguf.GetTensor("blk.0.attn_q.weight");
  ASSERT_TRUE(found.ok());
  EXPECT_EQ(*found, &q);
  EXPECT_EQ(gguf.FindTensor("token_embd.weight"), nullptr);
  absl::StatusOr<const GgufTensor*> missing = gguf.GetTensor("token_embd.weight");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("t.gguf: tensor 'token_embd.weight' is missing"));
}

TEST(GgufFileTest, TensorDataFeedsDequantization) {
  // One q4_0 block: d = 0.5, element j (< 16) has nibble j, element j + 16 has 15 - j.
  ByteWriter block;
  block.U16(0x3800);
  for (int j = 0; j < 16; ++j) block.U8(static_cast<uint8_t>(j | ((15 - j) << 4)));
  std::vector<uint8_t> bytes =
      GgufWriter().AddTensor({"w", {32}, kGgmlQ4_0, block.bytes(), std::nullopt}).Build();
  absl::StatusOr<std::unique_ptr<GgufFile>> file = GgufFile::FromBuffer("q.gguf", bytes);
  ASSERT_TRUE(file.ok()) << file.status();
  const GgufTensor& tensor = (*file)->tensors()[0];
  std::vector<float> values(32);
  ASSERT_TRUE(quant::DequantizeRow(tensor.type, tensor.data, absl::MakeSpan(values)).ok());
  EXPECT_EQ(values[3], (3 - 8) * 0.5f);
  EXPECT_EQ(values[16 + 3], (12 - 8) * 0.5f);
}

TEST(GgufFileTest, CustomAlignmentPlacesData) {
  GgufWriter writer;
  writer.Alignment(64);
  writer.AddTensor({"a", {3}, kGgmlF32, Iota(12, 0), std::nullopt});
  writer.AddTensor({"b", {5}, kGgmlF32, Iota(20, 50), std::nullopt});
  std::vector<uint8_t> bytes = writer.Build();
  absl::StatusOr<std::unique_ptr<GgufFile>> file = GgufFile::FromBuffer("aligned.gguf", bytes);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ((*file)->alignment(), 64u);
  EXPECT_EQ((*file)->data_offset() % 64, 0u);
  EXPECT_EQ((*file)->tensors()[1].offset_in_data, 64u);
  EXPECT_EQ((*file)->tensors()[1].data[0], 50);
}

TEST(GgufFileTest, OpenMapsAFile) {
  std::vector<uint8_t> bytes =
      GgufWriter().AddString("general.name", "tiny").AddTensor({"w", {2}, kGgmlF32, Iota(8, 9), std::nullopt}).Build();
  std::string path = ::testing::TempDir() + "/kvjit_gguf_open_test.gguf";
  std::FILE* out = std::fopen(path.c_str(), "wb");
  ASSERT_NE(out, nullptr);
  ASSERT_EQ(std::fwrite(bytes.data(), 1, bytes.size(), out), bytes.size());
  std::fclose(out);
  absl::StatusOr<std::unique_ptr<GgufFile>> file = GgufFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ((*file)->path(), path);
  EXPECT_EQ(*(*file)->GetString("general.name"), "tiny");
  EXPECT_EQ((*file)->tensors()[0].data[7], 16);
  file->reset();
  ::unlink(path.c_str());
}

std::vector<float> DequantizeAll(const GgufTensor& tensor) {
  std::vector<float> values(static_cast<size_t>(tensor.element_count()));
  absl::Status status = quant::DequantizeRow(tensor.type, tensor.data, absl::MakeSpan(values));
  EXPECT_TRUE(status.ok()) << tensor.name << ": " << status;
  return values;
}

// all_types.gguf-case was written by a separate script (not by GgufWriter): one
// pair per value type, alignment 64, one tensor per storage type.
TEST(GgufFileTest, CommittedFileOfEveryType) {
  absl::StatusOr<std::unique_ptr<GgufFile>> opened = GgufFile::Open(KVJIT_GGUF_DATA_DIR "/all_types.gguf-case");
  ASSERT_TRUE(opened.ok()) << opened.status();
  const GgufFile& file = **opened;
  EXPECT_EQ(file.alignment(), 64u);
  EXPECT_EQ(*file.GetUint("test.uint8"), 255u);
  EXPECT_EQ(*file.GetInt("test.int8"), -128);
  EXPECT_EQ(*file.GetUint("test.uint16"), 65535u);
  EXPECT_EQ(*file.GetInt("test.int16"), -32768);
  EXPECT_EQ(*file.GetUint("test.uint32"), 4294967295u);
  EXPECT_EQ(*file.GetInt("test.int32"), -2147483648LL);
  EXPECT_EQ(*file.GetFloat("test.float32"), 0.5);
  EXPECT_TRUE(*file.GetBool("test.bool"));
  EXPECT_EQ(*file.GetString("test.string"), "h\xc3\xa9llo");
  EXPECT_EQ(*file.GetUint("test.uint64"), ~uint64_t{0});
  EXPECT_EQ(*file.GetInt("test.int64"), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(*file.GetFloat("test.float64"), -0.25);
  EXPECT_THAT(*file.GetStringArray("test.strings"), ElementsAre("a", "bc"));
  EXPECT_EQ(file.Find("test.nested")->ToString(), "[[1, -1], []]");

  std::vector<std::string> names;
  for (const GgufTensor& tensor : file.tensors()) {
    names.push_back(tensor.name);
    EXPECT_EQ(quant::StorageTypeName(tensor.type), tensor.name);
    EXPECT_EQ(tensor.file_offset % 64, 0u) << tensor.name;
  }
  EXPECT_THAT(names, ElementsAre("f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q4_k", "q5_k", "q6_k"));
  EXPECT_THAT(DequantizeAll(*file.FindTensor("f32")), ElementsAre(1.0f, -2.0f, 3.5f, 0.0f));
  EXPECT_THAT(DequantizeAll(*file.FindTensor("f16")), ElementsAre(1.0f, -2.0f, 65504.0f, std::ldexp(1.0f, -24)));
  EXPECT_THAT(DequantizeAll(*file.FindTensor("bf16")), ElementsAre(1.0f, -3.0f, 0.0f, -0.0f));
  std::vector<float> q8_0 = DequantizeAll(*file.FindTensor("q8_0"));
  EXPECT_EQ(q8_0[31], 15.5f);
  std::vector<float> q4_0 = DequantizeAll(*file.FindTensor("q4_0"));
  EXPECT_EQ(q4_0[3], -5.0f);
  EXPECT_EQ(q4_0[19], -7.0f);
  std::vector<float> q4_1 = DequantizeAll(*file.FindTensor("q4_1"));
  EXPECT_EQ(q4_1[0], 0.0f);
  EXPECT_EQ(q4_1[16], 1.0f);
  EXPECT_THAT(DequantizeAll(*file.FindTensor("q5_0")), Each(15.0f));
  std::vector<float> q5_1 = DequantizeAll(*file.FindTensor("q5_1"));
  EXPECT_EQ(q5_1[0], 16.0f);
  EXPECT_EQ(q5_1[1], 0.0f);
  std::vector<float> q4_k = DequantizeAll(*file.FindTensor("q4_k"));
  EXPECT_EQ(q4_k[127], 1.0f);
  EXPECT_EQ(q4_k[128], 0.0f);
  std::vector<float> q5_k = DequantizeAll(*file.FindTensor("q5_k"));
  EXPECT_EQ(q5_k[0], 16.0f);
  EXPECT_EQ(q5_k[255], 0.0f);
  EXPECT_THAT(DequantizeAll(*file.FindTensor("q6_k")), Each(16.0f));
}

TEST(GgufFileTest, OpenReportsAMissingFile) {
  absl::StatusOr<std::unique_ptr<GgufFile>> file = GgufFile::Open("/nonexistent/model.gguf");
  EXPECT_EQ(file.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(file.status().message(), HasSubstr("/nonexistent/model.gguf: cannot open"));
}

TEST(GgufFileTest, OpenRefusesADirectory) {
  absl::StatusOr<std::unique_ptr<GgufFile>> file = GgufFile::Open(::testing::TempDir());
  ASSERT_FALSE(file.ok());
  EXPECT_THAT(file.status().message(), HasSubstr("not a regular file"));
}

}  // namespace
}  // namespace kvjit::gguf
