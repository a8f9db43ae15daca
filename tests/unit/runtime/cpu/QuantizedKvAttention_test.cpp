// A KV cache of bf16, q8_0, q4_0 or f8_e4m3 keys or values is attended as
// the f32 cache holding the values those give back: bit for bit, for every
// pair of key and value types, window and thread count; but q8_0 and q4_0
// keys, scored in integers against the query quantized to q8_0, give the f32
// cache's result for the query as q8_0 gives it back, to rounding.
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/cpu/KvCacheRows.h"
#include "runtime/cpu/PagedAttention.h"
#include "runtime/schema/KvCacheFormat.h"

namespace kvjit::cpu {
namespace {

using kvx::StorageType;

constexpr int64_t kHeads = 6;
constexpr int64_t kKvHeads = 2;
constexpr int64_t kHeadDim = 64;
constexpr int64_t kBlockSize = 16;
constexpr int64_t kLayers = 2;
constexpr int64_t kLayer = 1;
constexpr int64_t kBlocks = 16;

// Two sequences: 40 cached tokens of which the step brings the last 3 (a
// chunk of prefill), and 21 of which it brings 1 (a decode).
constexpr int32_t kContext[] = {40, 21};
constexpr int32_t kNewTokens[] = {3, 1};

struct Pool {
  PagedKvLayout layout;
  std::vector<uint8_t> bytes;
};

// The keys and values of every cached position, [context, kv_heads, head_dim] per sequence.
struct Contents {
  std::vector<std::vector<float>> keys, values;
};

Contents RandomContents(uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  Contents contents;
  for (int32_t context : kContext) {
    std::vector<float> k(static_cast<size_t>(context * kKvHeads * kHeadDim)), v(k.size());
    for (float& x : k) x = normal(rng);
    for (float& x : v) x = normal(rng);
    contents.keys.push_back(std::move(k));
    contents.values.push_back(std::move(v));
  }
  return contents;
}

// Sequence s's position p lives in block 2 s + p / 16 (blocks interleaved
// across sequences), slot p % 16.
int32_t SlotOf(size_t s, int32_t p) { return (p / kBlockSize * 2 + static_cast<int32_t>(s)) * kBlockSize + p % kBlockSize; }

Pool Write(const Contents& contents, StorageType keys, StorageType values, int64_t key_rotation = 0,
           int64_t value_rotation = 0) {
  Pool pool{{kLayers, kKvHeads, kHeadDim, kBlockSize, keys, values, key_rotation, value_rotation}, {}};
  pool.bytes.assign(static_cast<size_t>(kBlocks * pool.layout.BlockBytes()), 0x5A);
  ThreadPool threads(2);
  for (size_t s = 0; s < contents.keys.size(); ++s) {
    std::vector<int32_t> slots;
    for (int32_t p = 0; p < kContext[s]; ++p) slots.push_back(SlotOf(s, p));
    EXPECT_TRUE(WriteKv(contents.keys[s].data(), contents.values[s].data(), kContext[s], slots.data(), pool.layout,
                        kLayer, pool.bytes.data(), kBlocks, threads)
                    .ok());
  }
  return pool;
}

// `rows` as a cache of `type` gives them back.
std::vector<float> AsStored(StorageType type, std::vector<float> rows) {
  std::vector<uint8_t> stored(static_cast<size_t>(KvRowBytes(type, kHeadDim)));
  for (size_t at = 0; at < rows.size(); at += kHeadDim) {
    StoreKvRow(type, rows.data() + at, kHeadDim, stored.data());
    LoadKvRow(type, stored.data(), kHeadDim, rows.data() + at);
  }
  return rows;
}

std::vector<float> Attend(const Pool& pool, const std::vector<float>& query, int threads, int64_t window) {
  std::vector<int32_t> positions, seq_starts = {0}, context_lens, tables;
  const int64_t max_blocks = 3;
  for (size_t s = 0; s < 2; ++s) {
    for (int32_t p = kContext[s] - kNewTokens[s]; p < kContext[s]; ++p) positions.push_back(p);
    seq_starts.push_back(static_cast<int32_t>(positions.size()));
    context_lens.push_back(kContext[s]);
    for (int64_t b = 0; b < max_blocks; ++b) tables.push_back(static_cast<int32_t>(b * 2 + s));
  }
  const PagedAttentionBatch batch{positions.data(), seq_starts.data(), context_lens.data(), tables.data(), 2,
                                  max_blocks};
  ThreadPool thread_pool(threads);
  std::vector<float> out(query.size(), std::nanf(""));
  const absl::Status status =
      PagedAttention(query.data(), static_cast<int64_t>(positions.size()), kHeads, pool.layout, kLayer,
                     pool.bytes.data(), kBlocks, batch, 0.125f, window, 0.0f, out.data(), thread_pool);
  EXPECT_TRUE(status.ok()) << status;
  return out;
}

double MaxDifference(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::fabs(double{a[i]} - b[i]));
  return worst;
}

struct TypePair {
  StorageType keys, values;
};

class QuantizedKvAttentionTest : public ::testing::TestWithParam<TypePair> {};

TEST_P(QuantizedKvAttentionTest, EqualsTheF32CacheOfItsValues) {
  const auto [keys, values] = GetParam();
  const Contents contents = RandomContents(3);
  Contents stored;
  for (size_t s = 0; s < contents.keys.size(); ++s) {
    stored.keys.push_back(AsStored(keys, contents.keys[s]));
    stored.values.push_back(AsStored(values, contents.values[s]));
  }
  const Pool quantized = Write(contents, keys, values);
  const Pool reference = Write(stored, StorageType::F32, StorageType::F32);
  std::mt19937 rng(9);
  std::normal_distribution<float> normal;
  std::vector<float> query(static_cast<size_t>((kNewTokens[0] + kNewTokens[1]) * kHeads * kHeadDim));
  for (float& x : query) x = normal(rng);
  const bool integer_keys = kvx::QuantizesQuery(keys);
  const std::vector<float> reference_query = integer_keys ? AsStored(StorageType::Q8_0, query) : query;
  for (int64_t window : {0, 8}) {
    const std::vector<float> one_thread = Attend(quantized, query, 1, window);
    for (int threads : {1, 2}) {
      const std::vector<float> got = Attend(quantized, query, threads, window);
      const std::vector<float> want = Attend(reference, reference_query, threads, window);
      for (float x : got) ASSERT_FALSE(std::isnan(x));
      ASSERT_EQ(std::memcmp(got.data(), one_thread.data(), got.size() * sizeof(float)), 0)
          << "threads " << threads << ", window " << window;
      if (integer_keys) {
        // Outputs are O(2); only the order of the score's sums differs.
        EXPECT_LE(MaxDifference(got, want), 1e-4) << "threads " << threads << ", window " << window;
      } else {
        ASSERT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0)
            << "threads " << threads << ", window " << window;
      }
    }
  }
}

std::vector<float> RandomQuery(uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  std::vector<float> query(static_cast<size_t>((kNewTokens[0] + kNewTokens[1]) * kHeads * kHeadDim));
  for (float& x : query) x = normal(rng);
  return query;
}

// Rotating keys and values changes no score and no output but for rounding:
// the rotation is orthonormal, and attention rotates queries and outputs to
// match.
TEST(RotatedKvAttentionTest, AnUnquantizedRotatedCacheAttendsAsTheUnrotated) {
  const Contents contents = RandomContents(4);
  const std::vector<float> query = RandomQuery(5);
  const std::vector<float> plain = Attend(Write(contents, StorageType::F32, StorageType::F32), query, 2, 0);
  for (auto [keys, values] : {std::pair<int64_t, int64_t>{64, 0}, {0, 64}, {32, 16}, {64, 64}}) {
    const std::vector<float> rotated =
        Attend(Write(contents, StorageType::F32, StorageType::F32, keys, values), query, 2, 0);
    EXPECT_LT(MaxDifference(rotated, plain), 2e-5) << keys << ", " << values;
  }
}

// A head whose keys have an outlier channel, as real models' keys do: the
// q4_0 blocks that hold it round every other channel to a few levels, unless
// the rotation spreads it over the block first.
TEST(RotatedKvAttentionTest, RotationShrinksTheErrorOfQ4KeysWithAnOutlierChannel) {
  Contents contents = RandomContents(6);
  for (std::vector<float>& keys : contents.keys) {
    for (size_t at = 0; at < keys.size(); at += kHeadDim) keys[at + 5] = 40.0f;
  }
  const std::vector<float> query = RandomQuery(7);
  const std::vector<float> exact = Attend(Write(contents, StorageType::F32, StorageType::F32), query, 2, 0);
  const double unrotated = MaxDifference(Attend(Write(contents, StorageType::Q4_0, StorageType::F32), query, 2, 0), exact);
  const double rotated =
      MaxDifference(Attend(Write(contents, StorageType::Q4_0, StorageType::F32, 64, 0), query, 2, 0), exact);
  EXPECT_LT(rotated * 2, unrotated) << "rotated " << rotated << ", unrotated " << unrotated;
}

TEST(RotatedKvAttentionTest, RotationsThatDoNotDivideTheHeadAreRefused) {
  Pool pool = Write(RandomContents(8), StorageType::F32, StorageType::F32);
  pool.layout.key_rotation = 48;
  ThreadPool threads(1);
  std::vector<float> key(kKvHeads * kHeadDim, 1.0f);
  const int32_t slot = 0;
  const absl::Status status = WriteKv(key.data(), key.data(), 1, &slot, pool.layout, kLayer, pool.bytes.data(),
                                      kBlocks, threads);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("rotations of 48 and 0 elements do not divide head_dim 64"), std::string::npos)
      << status;
}

// Keys' and values' types each move the slot strides apart: a q4_0 key slot
// is 2 heads x 2 blocks x 18 bytes, an f16 value slot 2 x 64 x 2.
TEST(QuantizedKvLayoutTest, KeysAndValuesHaveTheirOwnStrides) {
  const PagedKvLayout layout{kLayers, kKvHeads, kHeadDim, kBlockSize, StorageType::Q4_0, StorageType::F16};
  EXPECT_EQ(layout.KeySlotStride(), 72);
  EXPECT_EQ(layout.ValueSlotStride(), 256);
  EXPECT_EQ(layout.ValueOffset(), 16 * 72);
  EXPECT_EQ(layout.LayerStride(), 16 * 72 + 16 * 256);
  EXPECT_EQ(layout.BlockBytes(), 2 * (16 * 72 + 16 * 256));
}

std::vector<TypePair> AllPairs() {
  std::vector<TypePair> pairs;
  for (const kvx::KvCacheFormat& keys : kvx::kKvCacheFormats) {
    for (const kvx::KvCacheFormat& values : kvx::kKvCacheFormats) {
      // f16 with f16 follows llama.cpp's arithmetic instead (PagedAttention_test);
      // f32 with f32 is the reference itself.
      const bool f16_pair = keys.type == StorageType::F16 && values.type == StorageType::F16;
      const bool f32_pair = keys.type == StorageType::F32 && values.type == StorageType::F32;
      if (!f16_pair && !f32_pair) pairs.push_back({keys.type, values.type});
    }
  }
  return pairs;
}

INSTANTIATE_TEST_SUITE_P(EveryPair, QuantizedKvAttentionTest, ::testing::ValuesIn(AllPairs()),
                         [](const ::testing::TestParamInfo<TypePair>& info) {
                           return std::string(kvx::FindKvCacheFormat(info.param.keys)->name) + "_" +
                                  kvx::FindKvCacheFormat(info.param.values)->name;
                         });

}  // namespace
}  // namespace kvjit::cpu
