// MatMul over weights in kvx's RowsInterleaved8 layout: the repacking is the
// schema's own (runtime/schema/WeightLayout.h), and every result must be bit
// for bit the GGUF-layout product's (MatMul.h's numeric contract).

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/cpu/MatMul.h"
#include "runtime/cpu/RowKernels.h"
#include "runtime/schema/WeightLayout.h"
#include "tests/unit/common/NumericCompare.h"
#include "tests/unit/runtime/cpu/MultiplyOnPool.h"
#include "tests/unit/runtime/cpu/RandomWeights.h"

namespace kvjit::cpu {
namespace {

using ::kvjit::testing::AllEqual;
using ::testing::HasSubstr;
using quant::StorageType;

constexpr StorageType kBlockTypes[] = {StorageType::kQ8_0, StorageType::kQ4_0, StorageType::kQ4_1,
                                       StorageType::kQ5_0, StorageType::kQ5_1};

// Five groups of 8 rows (an odd number, so threads split them unevenly) of
// an odd number of blocks.
constexpr int64_t kRows = 40;
constexpr int64_t kCols = 13 * 32;

std::vector<CpuIsa> SupportedIsas() {
  std::vector<CpuIsa> isas = {CpuIsa::kPortable};
  if (CpuSupports(CpuIsa::kAvx2)) isas.push_back(CpuIsa::kAvx2);
  if (CpuSupports(CpuIsa::kAvx512Vnni)) isas.push_back(CpuIsa::kAvx512Vnni);
  return isas;
}

std::vector<uint8_t> Interleaved(StorageType type, const std::vector<uint8_t>& gguf) {
  return kvx::InterleaveRows(gguf.data(), kRows, kCols / 32, static_cast<uint64_t>(quant::BytesPerBlock(type)));
}

std::vector<float> Activations(int64_t tokens, std::mt19937& rng) {
  std::vector<float> x(static_cast<size_t>(tokens * kCols));
  std::normal_distribution<float> normal;
  for (float& v : x) v = normal(rng);
  return x;
}

class MatMulLayoutTest : public ::testing::TestWithParam<StorageType> {};

// Token counts below, at and past the GEMM's groups of four and its passes
// of 128 tokens; thread counts that split the five groups unevenly.
TEST_P(MatMulLayoutTest, InterleavedEqualsGgufRowsBitForBit) {
  const StorageType type = GetParam();
  std::mt19937 rng(7000 + static_cast<uint32_t>(type));
  const std::vector<uint8_t> gguf = testing::RandomWeights(type, kRows, kCols, rng);
  const std::vector<uint8_t> interleaved = Interleaved(type, gguf);
  const WeightView gguf_view{type, kRows, kCols, gguf};
  const WeightView interleaved_view{type, kRows, kCols, interleaved, /*rows_interleaved=*/8};
  for (int64_t tokens : {1, 2, 3, 4, 5, 16, 33, 133}) {
    const std::vector<float> x = Activations(tokens, rng);
    const std::vector<float> expected = testing::MultiplyOnPool(gguf_view, x, tokens, 1, CpuIsa::kPortable);
    for (CpuIsa isa : SupportedIsas()) {
      for (int threads : {1, 2, 3}) {
        EXPECT_TRUE(AllEqual(testing::MultiplyOnPool(interleaved_view, x, tokens, threads, isa), expected))
            << CpuIsaName(isa) << ", " << threads << " threads, " << tokens << " tokens";
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(BlockTypes, MatMulLayoutTest, ::testing::ValuesIn(kBlockTypes),
                         [](const ::testing::TestParamInfo<StorageType>& info) {
                           return std::string(quant::StorageTypeName(info.param));
                         });

TEST(MatMulLayoutErrors, RefusesInterleavingsTheKernelsDoNotRead) {
  ThreadPool pool(1);
  std::vector<float> x(64), y(16);
  std::vector<uint8_t> q4_1(8 * 2 * 20);
  absl::Status status = MatMul(WeightView{StorageType::kQ4_1, 8, 64, q4_1, 4}, x.data(), 1, y.data(), pool);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("weight q4_1 [8 x 64] has rows interleaved by 4"));

  std::vector<uint8_t> f32(8 * 64 * 4);
  status = MatMul(WeightView{StorageType::kF32, 8, 64, f32, 8}, x.data(), 1, y.data(), pool);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("only the 32-element block types"));

  std::vector<uint8_t> twelve_rows(12 * 2 * 20);
  status = MatMul(WeightView{StorageType::kQ4_1, 12, 64, twelve_rows, 8}, x.data(), 1, y.data(), pool);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("12 rows, not a multiple of 8"));

  status = MatMulF32Reference(WeightView{StorageType::kQ4_1, 8, 64, q4_1, 8}, x.data(), 1, y.data());
  EXPECT_THAT(status.message(), HasSubstr("the oracle reads GGUF's rows"));
}

// A tied embedding table is also the output projection's weight, so it may
// be interleaved: a lookup reads each row's blocks from its group and
// dequantizes them to the GGUF row's values, for every row of a group.
TEST_P(MatMulLayoutTest, AnEmbeddingLookupReadsAnInterleavedTable) {
  const StorageType type = GetParam();
  std::mt19937 rng(7100 + static_cast<uint32_t>(type));
  const std::vector<uint8_t> gguf = testing::RandomWeights(type, kRows, kCols, rng);
  const std::vector<uint8_t> interleaved = Interleaved(type, gguf);
  const std::vector<int32_t> tokens = {0, 7, 8, 13, 39, 21, 22, 0, 31, 1, 2, 3, 4, 5, 6, 17};
  const int64_t count = static_cast<int64_t>(tokens.size());
  for (int threads : {1, 2}) {
    ThreadPool pool(threads);
    std::vector<float> expected(static_cast<size_t>(count * kCols), std::nanf(""));
    std::vector<float> actual(expected.size(), std::nanf(""));
    ASSERT_TRUE(EmbeddingLookup(WeightView{type, kRows, kCols, gguf}, tokens.data(), count, expected.data(), pool).ok());
    ASSERT_TRUE(EmbeddingLookup(WeightView{type, kRows, kCols, interleaved, /*rows_interleaved=*/8}, tokens.data(),
                                count, actual.data(), pool)
                    .ok());
    EXPECT_TRUE(AllEqual(actual, expected)) << threads << " threads";
  }
}

TEST(MatMulLayoutErrors, AnEmbeddingLookupRefusesWhatNoKernelReads) {
  ThreadPool pool(1);
  const int32_t token = 3;
  std::vector<float> out(64);
  std::vector<uint8_t> f32(8 * 64 * 4);
  absl::Status status = EmbeddingLookup(WeightView{StorageType::kF32, 8, 64, f32, 8}, &token, 1, out.data(), pool);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("EmbeddingLookup: weight f32 [8 x 64]"));
  EXPECT_THAT(status.message(), HasSubstr("only the 32-element block types"));

  std::vector<uint8_t> twelve_rows(12 * 2 * 20);
  status = EmbeddingLookup(WeightView{StorageType::kQ4_1, 12, 64, twelve_rows, 8}, &token, 1, out.data(), pool);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("12 rows, not a multiple of 8"));

  // Rows of no blocks: nothing to read or write, and no block to divide by.
  EXPECT_TRUE(EmbeddingLookup(WeightView{StorageType::kQ4_1, 8, 0, {}, 8}, &token, 1, out.data(), pool).ok());
}

}  // namespace
}  // namespace kvjit::cpu
