#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "frontend/gguf/GgufFile.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/frontend/gguf/GgufTestWriter.h"

namespace kvjit::gguf {
namespace {

using ::testing::HasSubstr;
using test::ByteWriter;
using test::GgufWriter;

constexpr uint32_t kGgmlF32 = 0;
constexpr uint32_t kGgmlQ4_0 = 2;
constexpr uint32_t kGgmlQ2_K = 10;

std::string RefusalMessage(const std::vector<uint8_t>& bytes) {
  absl::StatusOr<std::unique_ptr<GgufFile>> file = GgufFile::FromBuffer("bad.gguf", bytes);
  if (file.ok()) return "(accepted)";
  EXPECT_EQ(file.status().code(), absl::StatusCode::kInvalidArgument) << file.status();
  return std::string(file.status().message());
}

GgufWriter::Tensor F32Tensor(std::string name, std::vector<uint64_t> dims, size_t bytes) {
  return {std::move(name), std::move(dims), kGgmlF32, std::vector<uint8_t>(bytes), std::nullopt};
}

std::vector<uint8_t> Header(uint32_t version, uint64_t tensors, uint64_t entries) {
  ByteWriter writer;
  writer.U8('G').U8('G').U8('U').U8('F').U32(version).U64(tensors).U64(entries);
  return writer.bytes();
}

TEST(GgufMalformedTest, EmptyFile) {
  EXPECT_THAT(RefusalMessage({}), HasSubstr("bad.gguf: header: truncated: the magic needs 4 bytes at offset 0"));
}

TEST(GgufMalformedTest, BadMagic) {
  std::vector<uint8_t> bytes = GgufWriter().Build();
  bytes[3] = 'L';
  EXPECT_THAT(RefusalMessage(bytes), HasSubstr("bad.gguf: bad magic \"GGUL\": not a GGUF file"));
}

TEST(GgufMalformedTest, VersionOne) {
  EXPECT_THAT(RefusalMessage(GgufWriter().Version(1).Build()),
              HasSubstr("bad.gguf: GGUF version 1 is not supported (kvjit reads versions 2 and 3)"));
}

TEST(GgufMalformedTest, VersionFour) {
  EXPECT_THAT(RefusalMessage(GgufWriter().Version(4).Build()), HasSubstr("GGUF version 4 is not supported"));
}

TEST(GgufMalformedTest, BigEndian) {
  EXPECT_THAT(RefusalMessage(GgufWriter().Version(0x03000000).Build()),
              HasSubstr("big-endian GGUF (version 3) is not supported"));
}

TEST(GgufMalformedTest, TruncatedHeader) {
  std::vector<uint8_t> bytes = Header(3, 0, 0);
  bytes.resize(20);
  EXPECT_THAT(RefusalMessage(bytes),
              HasSubstr("header: truncated: the metadata count (n_kv) needs 8 bytes at offset 16, but only 4 remain"));
}

TEST(GgufMalformedTest, AbsurdTensorCount) {
  GgufWriter writer;
  writer.tensor_count_override = ~uint64_t{0};
  EXPECT_THAT(RefusalMessage(writer.Build()), HasSubstr("header: n_tensors 18446744073709551615 is more than the"));
}

TEST(GgufMalformedTest, AbsurdMetadataCount) {
  GgufWriter writer;
  writer.AddUint32("a", 1);
  writer.metadata_count_override = uint64_t{1} << 60;
  EXPECT_THAT(RefusalMessage(writer.Build()), HasSubstr("header: n_kv 1152921504606846976 is more than the"));
}

TEST(GgufMalformedTest, MissingMetadataEntry) {
  GgufWriter writer;
  writer.AddString("a", "twenty characters...");
  writer.metadata_count_override = 2;
  std::vector<uint8_t> bytes = writer.Build();
  bytes.resize(24 + 8 + 1 + 4 + 8 + 20);  // without the padding, whose zeros would read as an entry
  EXPECT_THAT(RefusalMessage(bytes), HasSubstr("metadata entry 1: truncated: the length of the key"));
}

TEST(GgufMalformedTest, KeyPastEnd) {
  ByteWriter writer;
  writer.Raw(Header(3, 0, 1)).U64(1000).U32(0).U32(0).U32(0).U32(0);
  EXPECT_THAT(RefusalMessage(writer.bytes()),
              HasSubstr("metadata entry 0: truncated: the key of 1000 bytes at offset 32 runs past the end"));
}

TEST(GgufMalformedTest, StringValuePastEnd) {
  ByteWriter value;
  value.U64(uint64_t{1} << 40).U32(0);
  EXPECT_THAT(RefusalMessage(GgufWriter().AddRaw("general.name", test::kString, value).Build()),
              HasSubstr("key 'general.name': truncated: string of 1099511627776 bytes"));
}

TEST(GgufMalformedTest, UnknownValueType) {
  EXPECT_THAT(RefusalMessage(GgufWriter().AddRaw("k", 13, ByteWriter().U32(0)).Build()),
              HasSubstr("key 'k': unknown value type 13"));
}

TEST(GgufMalformedTest, ArrayLengthOverflow) {
  ByteWriter value;
  value.U32(test::kUint32).U64(uint64_t{1} << 62).U32(0);
  EXPECT_THAT(RefusalMessage(GgufWriter().AddRaw("scores", test::kArray, value).Build()),
              HasSubstr("key 'scores': truncated: array at offset 42 of 4611686018427387904 uint32 elements"));
}

TEST(GgufMalformedTest, StringArrayElementPastEnd) {
  ByteWriter value;
  value.U32(test::kString).U64(3).Str("a").Str("b").U64(999);
  EXPECT_THAT(RefusalMessage(GgufWriter().AddRaw("tokens", test::kArray, value).Build()),
              HasSubstr("key 'tokens': array element 2: truncated: string of 999 bytes"));
}

TEST(GgufMalformedTest, ArraysNestedTooDeep) {
  ByteWriter value;
  for (int i = 0; i < 20; ++i) value.U32(test::kArray).U64(1);
  EXPECT_THAT(RefusalMessage(GgufWriter().AddRaw("deep", test::kArray, value).Build()),
              HasSubstr("key 'deep': array element 0: array element 0: array element 0:"));
  EXPECT_THAT(RefusalMessage(GgufWriter().AddRaw("deep", test::kArray, value).Build()),
              HasSubstr("is nested more than 8 arrays deep"));
}

TEST(GgufMalformedTest, DuplicateKey) {
  EXPECT_THAT(RefusalMessage(GgufWriter().AddUint32("a", 1).AddUint32("b", 2).AddUint32("a", 3).Build()),
              HasSubstr("bad.gguf: duplicate key 'a' (metadata entries 0 and 2)"));
}

TEST(GgufMalformedTest, EmptyKey) {
  EXPECT_THAT(RefusalMessage(GgufWriter().AddUint32("a", 1).AddUint32("", 2).Build()),
              HasSubstr("bad.gguf: metadata entry 1: the key is empty"));
}

TEST(GgufMalformedTest, KeysWithOddBytesAreEscaped) {
  EXPECT_THAT(RefusalMessage(GgufWriter().AddRaw(std::string("k\x01\n", 3), 99, ByteWriter()).Build()),
              HasSubstr("key 'k\\x01\\n': unknown value type 99"));
}

TEST(GgufMalformedTest, AlignmentNotAPowerOfTwo) {
  EXPECT_THAT(RefusalMessage(GgufWriter().AddUint32("general.alignment", 48).Build()),
              HasSubstr("bad.gguf: general.alignment 48 is not a power of two"));
  EXPECT_THAT(RefusalMessage(GgufWriter().AddUint32("general.alignment", 0).Build()),
              HasSubstr("general.alignment 0 is not a power of two"));
}

TEST(GgufMalformedTest, AlignmentOfTheWrongType) {
  EXPECT_THAT(RefusalMessage(GgufWriter().AddString("general.alignment", "32").Build()),
              HasSubstr("general.alignment is \"32\" (string), not a positive integer"));
}

TEST(GgufMalformedTest, TruncatedTensorInfo) {
  std::vector<uint8_t> bytes = GgufWriter().AddTensor(F32Tensor("w", {4, 4}, 64)).Build();
  bytes.resize(24 + 8 + 1 + 4 + 8 + 3);  // header, name, n_dims, first dim, 3 bytes of the second
  EXPECT_THAT(RefusalMessage(bytes), HasSubstr("tensor 'w': truncated: a dimension needs 8 bytes at offset 45"));
}

TEST(GgufMalformedTest, TensorNamePastEnd) {
  ByteWriter writer;
  writer.Raw(Header(3, 1, 0)).U64(500).U64(0).U64(0).U64(0);
  EXPECT_THAT(RefusalMessage(writer.bytes()), HasSubstr("tensor 0: truncated: the name of 500 bytes"));
}

TEST(GgufMalformedTest, TooManyDims) {
  EXPECT_THAT(RefusalMessage(GgufWriter().AddTensor(F32Tensor("w", {1, 1, 1, 1, 1}, 4)).Build()),
              HasSubstr("tensor 'w': n_dims 5 is more than 4"));
}

TEST(GgufMalformedTest, ZeroDim) {
  EXPECT_THAT(RefusalMessage(GgufWriter().AddTensor(F32Tensor("w", {4, 0}, 0)).Build()),
              HasSubstr("tensor 'w': dimension 1 is 0, not a positive int64"));
}

TEST(GgufMalformedTest, NegativeDim) {
  EXPECT_THAT(RefusalMessage(GgufWriter().AddTensor(F32Tensor("w", {uint64_t{1} << 63}, 0)).Build()),
              HasSubstr("tensor 'w': dimension 0 is 9223372036854775808, not a positive int64"));
}

TEST(GgufMalformedTest, ElementCountOverflow) {
  EXPECT_THAT(RefusalMessage(GgufWriter().AddTensor(F32Tensor("w", {uint64_t{1} << 32, uint64_t{1} << 32}, 0)).Build()),
              HasSubstr("tensor 'w': the element count overflows int64 at dimension 1"));
}

TEST(GgufMalformedTest, ByteSizeOverflow) {
  EXPECT_THAT(RefusalMessage(GgufWriter().AddTensor(F32Tensor("w", {uint64_t{1} << 62}, 0)).Build()),
              HasSubstr("tensor 'w': rows (dimension 0): 4611686018427387904 f32 elements overflow"));
}

TEST(GgufMalformedTest, UnknownTensorType) {
  EXPECT_THAT(RefusalMessage(GgufWriter().AddTensor({"w", {32}, 99, std::vector<uint8_t>(32), std::nullopt}).Build()),
              HasSubstr("tensor 'w': ggml type 99 is not a known ggml type"));
}

TEST(GgufMalformedTest, UnsupportedTensorType) {
  absl::StatusOr<std::unique_ptr<GgufFile>> file = GgufFile::FromBuffer(
      "q2k.gguf", GgufWriter().AddTensor({"w", {256}, kGgmlQ2_K, std::vector<uint8_t>(84), std::nullopt}).Build());
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(file.status().message(), HasSubstr("q2k.gguf: tensor 'w': ggml type 10: Q2_K is not supported"));
}

TEST(GgufMalformedTest, RowNotAWholeNumberOfBlocks) {
  EXPECT_THAT(
      RefusalMessage(GgufWriter().AddTensor({"w", {48, 2}, kGgmlQ4_0, std::vector<uint8_t>(54), std::nullopt}).Build()),
      HasSubstr("tensor 'w': rows (dimension 0): 48 q4_0 elements are not a multiple of the block size 32"));
}

TEST(GgufMalformedTest, MisalignedOffset) {
  GgufWriter writer;
  writer.AddTensor(F32Tensor("a", {4}, 16));
  GgufWriter::Tensor b = F32Tensor("b", {4}, 16);
  b.offset_override = 16;
  writer.AddTensor(b);
  EXPECT_THAT(RefusalMessage(writer.Build()), HasSubstr("tensor 'b': data offset 16 is not a multiple of the alignment 32"));
}

TEST(GgufMalformedTest, DataPastEnd) {
  std::vector<uint8_t> bytes = GgufWriter().AddTensor(F32Tensor("w", {8}, 32)).Build();
  bytes.resize(bytes.size() - 1);
  EXPECT_THAT(RefusalMessage(bytes), HasSubstr("tensor 'w': data of 32 bytes at data offset 0"));
  EXPECT_THAT(RefusalMessage(bytes), HasSubstr("runs past the end of the file"));
}

TEST(GgufMalformedTest, DataOffsetFarPastEnd) {
  GgufWriter::Tensor tensor = F32Tensor("w", {8}, 32);
  tensor.offset_override = ~uint64_t{31};
  EXPECT_THAT(RefusalMessage(GgufWriter().AddTensor(tensor).Build()), HasSubstr("runs past the end of the file"));
}

TEST(GgufMalformedTest, DuplicateTensorName) {
  GgufWriter writer;
  writer.AddTensor(F32Tensor("w", {4}, 16)).AddTensor(F32Tensor("v", {4}, 16)).AddTensor(F32Tensor("w", {4}, 16));
  EXPECT_THAT(RefusalMessage(writer.Build()), HasSubstr("duplicate tensor name 'w' (tensors 0 and 2)"));
}

// Every prefix of a valid file that cuts into its header, metadata, tensor
// infos or tensor data is refused.
TEST(GgufMalformedTest, EveryTruncationIsRefused) {
  GgufWriter writer;
  writer.AddString("general.architecture", "llama").AddStringArray("tokens", {"a", "bb"});
  writer.AddRaw("nested", test::kArray, ByteWriter().U32(test::kArray).U64(1).U32(test::kUint8).U64(2).U8(1).U8(2));
  writer.AddTensor(F32Tensor("w", {2, 2}, 16));
  const std::vector<uint8_t> bytes = writer.Build();
  absl::StatusOr<std::unique_ptr<GgufFile>> whole = GgufFile::FromBuffer("whole.gguf", bytes);
  ASSERT_TRUE(whole.ok()) << whole.status();
  // Padding after the last tensor's data is not needed.
  const size_t end_of_data = (*whole)->tensors()[0].file_offset + (*whole)->tensors()[0].size_bytes;
  for (size_t size = 0; size < end_of_data; ++size) {
    std::vector<uint8_t> prefix(bytes.begin(), bytes.begin() + size);
    absl::StatusOr<std::unique_ptr<GgufFile>> file = GgufFile::FromBuffer("cut.gguf", prefix);
    EXPECT_FALSE(file.ok()) << "a prefix of " << size << " bytes was accepted";
  }
}

// The fuzzer's seed corpus: small malformed GGUF files (named .gguf-case so
// that no one takes them for models), each refused with a known
// message. A new file there needs a line here.
TEST(GgufMalformedTest, FuzzCorpusIsRefused) {
  const std::map<std::string, std::string> expected = {
      {"array_length_overflow.gguf-case", "cannot fit in the"},
      {"bad_magic.gguf-case", "bad magic"},
      {"big_endian.gguf-case", "big-endian GGUF"},
      {"data_past_end.gguf-case", "runs past the end of the file"},
      {"duplicate_key.gguf-case", "duplicate key 'a'"},
      {"duplicate_tensor.gguf-case", "duplicate tensor name 'w'"},
      {"empty.gguf-case", "truncated: the magic"},
      {"huge_n_kv.gguf-case", "n_kv"},
      {"huge_n_tensors.gguf-case", "n_tensors"},
      {"misaligned_offset.gguf-case", "is not a multiple of the alignment"},
      {"alignment_not_power_of_two.gguf-case", "is not a power of two"},
      {"nested_arrays.gguf-case", "nested more than 8 arrays deep"},
      {"n_dims_5.gguf-case", "n_dims 5 is more than 4"},
      {"partial_block.gguf-case", "not a multiple of the block size 32"},
      {"q2_k_tensor.gguf-case", "Q2_K is not supported"},
      {"string_past_end.gguf-case", "truncated: string of"},
      {"truncated_header.gguf-case", "truncated: the metadata count (n_kv)"},
      {"unknown_tensor_type.gguf-case", "is not a known ggml type"},
      {"unknown_value_type.gguf-case", "unknown value type"},
      {"version_1.gguf-case", "GGUF version 1 is not supported"},
      {"zero_dim.gguf-case", "dimension 1 is 0"},
  };
  std::map<std::string, bool> seen;
  for (const auto& entry : std::filesystem::directory_iterator(KVJIT_GGUF_CORPUS_DIR)) {
    const std::string name = entry.path().filename().string();
    SCOPED_TRACE(name);
    std::ifstream in(entry.path(), std::ios::binary);
    const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    auto it = expected.find(name);
    ASSERT_NE(it, expected.end()) << "corpus file without an expected message";
    absl::StatusOr<std::unique_ptr<GgufFile>> file = GgufFile::FromBuffer(name, bytes);
    ASSERT_FALSE(file.ok()) << "corpus file accepted";
    EXPECT_THAT(file.status().message(), HasSubstr(it->second));
    seen[name] = true;
  }
  for (const auto& [name, message] : expected) EXPECT_TRUE(seen[name]) << name << " is missing from the corpus";
}

}  // namespace
}  // namespace kvjit::gguf
