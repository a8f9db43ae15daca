// The reference's cache rounding, written from KvCacheFormat.h's
// definitions, against the runtime's kernels (StoreKvRow, LoadKvRow): two
// implementations of each type that agree but for a rare tie the two
// round apart.
#include "ir/Reference/RefCacheRounding.h"

#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/cpu/KvCacheRows.h"
#include "runtime/schema/KvCacheFormat.h"

namespace kvjit::reference {
namespace {

struct Case {
  kv::CacheElement element;
  kvx::StorageType storage;
};

class RefCacheRoundingTest : public ::testing::TestWithParam<Case> {};

TEST_P(RefCacheRoundingTest, AgreesWithTheRuntimesKernels) {
  const Case c = GetParam();
  constexpr int64_t kHeadDim = 64;
  constexpr int kRows = 2000;
  std::mt19937 rng(17);
  std::normal_distribution<float> normal(0.0f, 1.5f);
  std::vector<uint8_t> stored(static_cast<size_t>(cpu::KvRowBytes(c.storage, kHeadDim)));
  int64_t differing = 0;
  for (int row = 0; row < kRows; ++row) {
    std::vector<float> x(kHeadDim);
    for (float& v : x) v = normal(rng);
    if (row % 100 == 0) x[row % kHeadDim] = 40.0f;  // an outlier sets its block's scale
    std::vector<float> reference = x, runtime(kHeadDim);
    RoundAsCacheStores(c.element, reference.data(), kHeadDim);
    cpu::StoreKvRow(c.storage, x.data(), kHeadDim, stored.data());
    cpu::LoadKvRow(c.storage, stored.data(), kHeadDim, runtime.data());
    for (int64_t i = 0; i < kHeadDim; ++i) {
      ASSERT_FALSE(std::isnan(reference[i]));
      if (reference[i] == runtime[i]) continue;
      ++differing;
      // Where they differ, by one code: at most one step of the block's
      // scale (or, for the float types, of the element).
      float block_max = 0;
      for (int64_t j = i / 32 * 32; j < i / 32 * 32 + 32; ++j) block_max = std::max(block_max, std::fabs(x[j]));
      EXPECT_LE(std::fabs(reference[i] - runtime[i]), block_max / 7.5f) << row << ", " << i;
    }
  }
  // Ties fall apart rarely: under one element in 10,000.
  EXPECT_LE(differing, kRows * kHeadDim / 10000) << differing << " of " << kRows * kHeadDim;
}

// The reference's rotation, entry by entry in double, against the runtime's
// butterfly.
TEST(RefCacheRotationTest, AgreesWithTheRuntimesButterfly) {
  std::mt19937 rng(23);
  std::normal_distribution<float> normal;
  for (int64_t block : {2, 32, 64, 128}) {
    std::vector<float> x(128);
    for (float& v : x) v = normal(rng);
    std::vector<float> reference = x, runtime = x;
    RotateAsCacheStores(reference.data(), 128, block);
    cpu::RotateHadamard(runtime.data(), 128, block);
    for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(reference[i], runtime[i], 1e-5) << block << " " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(EveryType, RefCacheRoundingTest,
                         ::testing::Values(Case{kv::CacheElement::f32, kvx::StorageType::F32},
                                           Case{kv::CacheElement::f16, kvx::StorageType::F16},
                                           Case{kv::CacheElement::bf16, kvx::StorageType::BF16},
                                           Case{kv::CacheElement::q8_0, kvx::StorageType::Q8_0},
                                           Case{kv::CacheElement::q4_0, kvx::StorageType::Q4_0},
                                           Case{kv::CacheElement::f8_e4m3, kvx::StorageType::F8_E4M3}),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return std::string(kv::stringifyCacheElement(info.param.element));
                         });

}  // namespace
}  // namespace kvjit::reference
