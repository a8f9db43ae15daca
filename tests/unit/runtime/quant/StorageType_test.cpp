#include "runtime/quant/StorageType.h"

#include <cstdint>
#include <limits>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvjit::quant {
namespace {

using ::testing::HasSubstr;

struct Expected {
  StorageType type;
  const char* name;
  uint32_t ggml_id;
  int64_t elements_per_block;
  int64_t bytes_per_block;
};

// Sizes from ggml's block structs: sizeof(block_q4_0) == 18, and so on.
constexpr Expected kExpected[] = {
    {StorageType::kF32, "f32", 0, 1, 4},       {StorageType::kF16, "f16", 1, 1, 2},
    {StorageType::kBF16, "bf16", 30, 1, 2},    {StorageType::kQ8_0, "q8_0", 8, 32, 34},
    {StorageType::kQ4_0, "q4_0", 2, 32, 18},   {StorageType::kQ4_1, "q4_1", 3, 32, 20},
    {StorageType::kQ5_0, "q5_0", 6, 32, 22},   {StorageType::kQ5_1, "q5_1", 7, 32, 24},
    {StorageType::kQ4_K, "q4_k", 12, 256, 144}, {StorageType::kQ5_K, "q5_k", 13, 256, 176},
    {StorageType::kQ6_K, "q6_k", 14, 256, 210},
};

TEST(StorageTypeTest, TableMatchesGgml) {
  for (const Expected& e : kExpected) {
    SCOPED_TRACE(e.name);
    EXPECT_EQ(StorageTypeName(e.type), e.name);
    EXPECT_EQ(GgmlTypeId(e.type), e.ggml_id);
    EXPECT_EQ(ElementsPerBlock(e.type), e.elements_per_block);
    EXPECT_EQ(BytesPerBlock(e.type), e.bytes_per_block);
    absl::StatusOr<StorageType> from_ggml = StorageTypeFromGgml(e.ggml_id);
    ASSERT_TRUE(from_ggml.ok()) << from_ggml.status();
    EXPECT_EQ(*from_ggml, e.type);
    absl::StatusOr<StorageType> from_name = StorageTypeFromName(e.name);
    ASSERT_TRUE(from_name.ok()) << from_name.status();
    EXPECT_EQ(*from_name, e.type);
  }
}

TEST(StorageTypeTest, KnownButUnsupportedGgmlTypeIsNamed) {
  absl::StatusOr<StorageType> q2k = StorageTypeFromGgml(10);
  ASSERT_FALSE(q2k.ok());
  EXPECT_EQ(q2k.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(q2k.status().message(), HasSubstr("ggml type 10"));
  EXPECT_THAT(q2k.status().message(), HasSubstr("Q2_K is not supported"));
  EXPECT_THAT(StorageTypeFromGgml(20).status().message(), HasSubstr("IQ4_NL is not supported"));
}

TEST(StorageTypeTest, UnknownGgmlTypeIsRejected) {
  for (uint32_t id : {4u, 31u, 1000u, std::numeric_limits<uint32_t>::max()}) {
    absl::StatusOr<StorageType> type = StorageTypeFromGgml(id);
    ASSERT_FALSE(type.ok());
    EXPECT_THAT(type.status().message(), HasSubstr(absl::StrCat("ggml type ", id, " is not a known ggml type")));
  }
}

TEST(StorageTypeTest, UnknownNameIsRejected) {
  absl::StatusOr<StorageType> type = StorageTypeFromName("Q4_0");
  ASSERT_FALSE(type.ok());
  EXPECT_THAT(type.status().message(), HasSubstr("unknown storage type 'Q4_0'"));
}

TEST(StorageTypeTest, RowBytesCountsWholeBlocks) {
  EXPECT_EQ(*RowBytes(StorageType::kF32, 64), 256u);
  EXPECT_EQ(*RowBytes(StorageType::kBF16, 3), 6u);
  EXPECT_EQ(*RowBytes(StorageType::kQ4_0, 64), 36u);
  EXPECT_EQ(*RowBytes(StorageType::kQ6_K, 512), 420u);
  EXPECT_EQ(*RowBytes(StorageType::kQ8_0, 0), 0u);
}

TEST(StorageTypeTest, RowBytesRejectsPartialBlocks) {
  absl::StatusOr<uint64_t> bytes = RowBytes(StorageType::kQ4_K, 300);
  ASSERT_FALSE(bytes.ok());
  EXPECT_THAT(bytes.status().message(), HasSubstr("300 q4_k elements are not a multiple of the block size 256"));
}

TEST(StorageTypeTest, RowBytesRejectsNegativeAndOverflowingCounts) {
  EXPECT_THAT(RowBytes(StorageType::kF32, -1).status().message(), HasSubstr("negative element count -1"));
  absl::StatusOr<uint64_t> bytes = RowBytes(StorageType::kF32, std::numeric_limits<int64_t>::max());
  ASSERT_FALSE(bytes.ok());
  EXPECT_THAT(bytes.status().message(), HasSubstr("overflow"));
  // Only f32 can overflow: 2^63 - 1 elements of 2 bytes still fit, and a
  // block of 32 elements takes at most 34 bytes.
  EXPECT_EQ(*RowBytes(StorageType::kF16, std::numeric_limits<int64_t>::max()), ~uint64_t{1});
  EXPECT_EQ(*RowBytes(StorageType::kBF16, int64_t{1} << 62), uint64_t{1} << 63);
  EXPECT_TRUE(RowBytes(StorageType::kQ5_1, int64_t{1} << 62).ok());
}

}  // namespace
}  // namespace kvjit::quant
