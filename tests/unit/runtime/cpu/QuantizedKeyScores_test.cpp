// Scores over q8_0 and q4_0 keys: the integer dot products of the stored
// keys with the query as q8_0 stores it, the same bits under every ISA.
#include "runtime/cpu/QuantizedKeyScores.h"

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/cpu/KvCacheRows.h"
#include "runtime/schema/KvCacheFormat.h"

namespace kvjit::cpu {
namespace {

using kvx::StorageType;

constexpr int64_t kHeadDim = 128;
constexpr int64_t kHeads = 3;
// Key rows sit this many bytes apart, as a slot's other kv heads would put them.
constexpr int64_t kKeyStride = 200;

struct Case {
  StorageType keys;
  int64_t rows;
};

class QuantizedKeyScoresTest : public ::testing::TestWithParam<Case> {};

std::vector<float> Normal(size_t n, uint32_t seed, float sigma) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, sigma);
  std::vector<float> x(n);
  for (float& v : x) v = normal(rng);
  return x;
}

std::vector<float> Scores(CpuIsa isa, StorageType type, const std::vector<uint8_t>& keys, int64_t rows,
                          const std::vector<float>& queries) {
  QuantizedKeyScorer scorer(isa, type, kHeadDim, kHeads);
  scorer.SetQueries(queries.data(), kHeads);
  // Each head's row is rows + 1 long: the last score must stay untouched.
  std::vector<float> out(static_cast<size_t>(kHeads * (rows + 1)), -7.0f);
  scorer.Score(keys.data(), kKeyStride, rows, 0.125f, out.data(), rows + 1);
  for (int64_t h = 0; h < kHeads; ++h) EXPECT_EQ(out[h * (rows + 1) + rows], -7.0f) << "head " << h;
  return out;
}

TEST_P(QuantizedKeyScoresTest, AreTheDotsOfTheStoredKeysWithTheQ8Query) {
  const auto [type, rows] = GetParam();
  ASSERT_TRUE(kvx::QuantizesQuery(type));
  const std::vector<float> key_values = Normal(static_cast<size_t>(rows * kHeadDim), 1, 2.0f);
  std::vector<uint8_t> keys(static_cast<size_t>(rows * kKeyStride), 0xA5);
  std::vector<float> stored_keys(key_values.size());
  for (int64_t r = 0; r < rows; ++r) {
    StoreKvRow(type, key_values.data() + r * kHeadDim, kHeadDim, keys.data() + r * kKeyStride);
    LoadKvRow(type, keys.data() + r * kKeyStride, kHeadDim, stored_keys.data() + r * kHeadDim);
  }
  const std::vector<float> queries = Normal(static_cast<size_t>(kHeads * kHeadDim), 2, 1.0f);
  std::vector<uint8_t> query_bytes(static_cast<size_t>(KvRowBytes(StorageType::Q8_0, kHeads * kHeadDim)));
  std::vector<float> stored_queries(queries.size());
  StoreKvRow(StorageType::Q8_0, queries.data(), kHeads * kHeadDim, query_bytes.data());
  LoadKvRow(StorageType::Q8_0, query_bytes.data(), kHeads * kHeadDim, stored_queries.data());

  const std::vector<float> portable = Scores(CpuIsa::kPortable, type, keys, rows, queries);
  for (CpuIsa isa : {CpuIsa::kAvx2, CpuIsa::kAvx512Vnni}) {
    if (!CpuSupports(isa)) continue;
    const std::vector<float> fast = Scores(isa, type, keys, rows, queries);
    EXPECT_EQ(std::memcmp(fast.data(), portable.data(), fast.size() * sizeof(float)), 0) << CpuIsaName(isa);
  }
  for (int64_t h = 0; h < kHeads; ++h) {
    for (int64_t r = 0; r < rows; ++r) {
      double dot = 0;
      for (int64_t e = 0; e < kHeadDim; ++e) {
        dot += double{stored_queries[h * kHeadDim + e]} * stored_keys[r * kHeadDim + e];
      }
      const float got = portable[h * (rows + 1) + r];
      ASSERT_FALSE(std::isnan(got));
      // The products are exact in the integers; only the f32 sums of the
      // blocks' scaled lane sums round.
      EXPECT_NEAR(got, 0.125 * dot, 1e-5 * (1 + std::fabs(0.125 * dot))) << "head " << h << ", row " << r;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Keys, QuantizedKeyScoresTest,
                         ::testing::Values(Case{StorageType::Q8_0, 1}, Case{StorageType::Q8_0, 2},
                                           Case{StorageType::Q8_0, 17}, Case{StorageType::Q4_0, 1},
                                           Case{StorageType::Q4_0, 16}, Case{StorageType::Q4_0, 3}),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return std::string(kvx::FindKvCacheFormat(info.param.keys)->name) + "_" +
                                  std::to_string(info.param.rows) + "_rows";
                         });

TEST(QuantizedKeyScoresTest, OnlyQ8AndQ4KeysQuantizeTheQuery) {
  for (const kvx::KvCacheFormat& format : kvx::kKvCacheFormats) {
    const bool integer = format.type == StorageType::Q8_0 || format.type == StorageType::Q4_0;
    EXPECT_EQ(kvx::QuantizesQuery(format.type), integer) << format.name;
  }
}

}  // namespace
}  // namespace kvjit::cpu
