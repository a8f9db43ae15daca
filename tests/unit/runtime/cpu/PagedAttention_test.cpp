#include "runtime/cpu/PagedAttention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/cpu/FastExp.h"
#include "runtime/quant/Half.h"
#include "tests/unit/common/NumericCompare.h"

namespace kvjit::cpu {
namespace {

using ::kvjit::testing::Absolute;
using ::kvjit::testing::AllClose;
using ::kvjit::testing::AllEqual;
using ::testing::HasSubstr;

constexpr int64_t kHeads = 6;
constexpr int64_t kKvHeads = 2;
constexpr int64_t kHeadDim = 40;  // not a multiple of 8: exercises the dot product's tail
constexpr int64_t kBlockSize = 16;
constexpr int64_t kLayers = 3;
constexpr int64_t kLayer = 1;
constexpr int64_t kPoolBlocks = 24;

struct Sequence {
  int32_t context;    // tokens cached after the step
  int32_t new_tokens;  // the step's tokens: the last new_tokens positions
};

// A step mixing a chunked prefill (19 new of 37: its tokens end in
// different registers of 8 and blocks), a whole prefill (5 of 5) and decodes
// (1 of 70, 1 of 16: a full block).
const std::vector<Sequence> kSequences = {{37, 19}, {5, 5}, {70, 1}, {16, 1}};

struct Cache {
  PagedKvLayout layout;
  std::vector<uint8_t> pool;
  std::vector<int32_t> block_tables;
  int64_t max_blocks = 0;
  // Contiguous copies of each sequence's K and V, [context, kv_heads, head_dim],
  // as stored (rounded to f16 for f16 pools).
  std::vector<std::vector<float>> keys, values;
};

float AsStored(float v, kvx::StorageType type) {
  return type == kvx::StorageType::F16 ? quant::HalfToFloat(quant::FloatToHalf(v)) : v;
}

// Fills the cache through WriteKv with blocks handed out in a scrambled order.
Cache BuildCache(kvx::StorageType type, uint32_t seed) {
  Cache cache;
  cache.layout = PagedKvLayout{kLayers, kKvHeads, kHeadDim, kBlockSize, type, type};
  cache.pool.assign(static_cast<size_t>(kPoolBlocks * cache.layout.BlockBytes()), 0xAB);
  std::mt19937 rng(seed);
  std::vector<int32_t> free_blocks(kPoolBlocks);
  std::iota(free_blocks.begin(), free_blocks.end(), 0);
  std::shuffle(free_blocks.begin(), free_blocks.end(), rng);
  for (const Sequence& s : kSequences) cache.max_blocks = std::max<int64_t>(cache.max_blocks, (s.context + kBlockSize - 1) / kBlockSize);
  cache.block_tables.assign(kSequences.size() * cache.max_blocks, -1);
  std::normal_distribution<float> normal;
  size_t next_free = 0;
  ThreadPool pool(2);
  for (size_t s = 0; s < kSequences.size(); ++s) {
    const int32_t context = kSequences[s].context;
    for (int64_t b = 0; b * kBlockSize < context; ++b) cache.block_tables[s * cache.max_blocks + b] = free_blocks[next_free++];
    std::vector<float> k(static_cast<size_t>(context * kKvHeads * kHeadDim)), v(k.size());
    for (float& x : k) x = normal(rng);
    for (float& x : v) x = normal(rng);
    std::vector<int32_t> slots(context);
    for (int32_t p = 0; p < context; ++p) {
      slots[p] = cache.block_tables[s * cache.max_blocks + p / kBlockSize] * kBlockSize + p % kBlockSize;
    }
    EXPECT_TRUE(WriteKv(k.data(), v.data(), context, slots.data(), cache.layout, kLayer, cache.pool.data(),
                        kPoolBlocks, pool)
                    .ok());
    for (float& x : k) x = AsStored(x, type);
    for (float& x : v) x = AsStored(x, type);
    cache.keys.push_back(std::move(k));
    cache.values.push_back(std::move(v));
  }
  return cache;
}

struct Step {
  std::vector<int32_t> positions, seq_starts, context_lens, block_tables;
  std::vector<float> query;
  int64_t tokens = 0;
  PagedAttentionBatch Batch(int64_t max_blocks) const {
    return {positions.data(),    seq_starts.data(), context_lens.data(), block_tables.data(),
            static_cast<int64_t>(context_lens.size()), max_blocks};
  }
};

// The step for the given sequences (indices into kSequences), with queries
// drawn per sequence from `seed` so a sequence's queries do not depend on
// which others share its step.
Step MakeStep(const Cache& cache, const std::vector<size_t>& which, uint32_t seed) {
  Step step;
  step.seq_starts.push_back(0);
  for (size_t s : which) {
    const Sequence& sequence = kSequences[s];
    std::mt19937 rng(seed + static_cast<uint32_t>(s));
    std::normal_distribution<float> normal;
    for (int32_t p = sequence.context - sequence.new_tokens; p < sequence.context; ++p) {
      step.positions.push_back(p);
      for (int64_t i = 0; i < kHeads * kHeadDim; ++i) step.query.push_back(normal(rng));
    }
    step.seq_starts.push_back(static_cast<int32_t>(step.positions.size()));
    step.context_lens.push_back(sequence.context);
    step.block_tables.insert(step.block_tables.end(), cache.block_tables.begin() + s * cache.max_blocks,
                             cache.block_tables.begin() + (s + 1) * cache.max_blocks);
  }
  step.tokens = static_cast<int64_t>(step.positions.size());
  return step;
}

std::vector<float> Attend(const Cache& cache, const Step& step, float scale, int threads, int64_t window = 0,
                          float softcap = 0.0f) {
  ThreadPool pool(threads);
  std::vector<float> out(step.query.size(), std::nanf(""));
  const absl::Status status = PagedAttention(step.query.data(), step.tokens, kHeads, cache.layout, kLayer,
                                             cache.pool.data(), kPoolBlocks, step.Batch(cache.max_blocks), scale,
                                             window, softcap, out.data(), pool);
  EXPECT_TRUE(status.ok()) << status;
  return out;
}

// The first key the query at `position` sees: HF Mistral's and llama.cpp's
// sliding window keeps keys j with position - j < window.
int32_t FirstKey(int32_t position, int64_t window) {
  return window > 0 ? std::max<int32_t>(0, position - static_cast<int32_t>(window) + 1) : 0;
}

// softmax(q k^T * scale) v over keys 0..p (the window's, with one) of the
// sequence's contiguous copy, in double; with a softcap each scaled score s
// becomes softcap * tanh(s / softcap).
std::vector<double> NaiveAttention(const Cache& cache, const Step& step, const std::vector<size_t>& which, float scale,
                                   int64_t window = 0, double softcap = 0.0) {
  std::vector<double> out(step.query.size());
  for (size_t i = 0; i < which.size(); ++i) {
    const std::vector<float>& k = cache.keys[which[i]];
    const std::vector<float>& v = cache.values[which[i]];
    for (int32_t t = step.seq_starts[i]; t < step.seq_starts[i + 1]; ++t) {
      const int32_t visible = step.positions[t] + 1;
      for (int64_t h = 0; h < kHeads; ++h) {
        const int64_t g = h / (kHeads / kKvHeads);
        std::vector<float> q(step.query.begin() + (t * kHeads + h) * kHeadDim,
                             step.query.begin() + (t * kHeads + h + 1) * kHeadDim);
        for (float& x : q) x = AsStored(x, cache.layout.key_type);  // an f16 cache's query is f16 too
        std::vector<double> scores(visible);
        double max = -INFINITY;
        const int32_t first = FirstKey(step.positions[t], window);
        for (int32_t j = first; j < visible; ++j) {
          double dot = 0.0;
          for (int64_t d = 0; d < kHeadDim; ++d) dot += static_cast<double>(q[d]) * k[(j * kKvHeads + g) * kHeadDim + d];
          scores[j] = dot * scale;
          if (softcap > 0) scores[j] = softcap * std::tanh(scores[j] / softcap);
          max = std::max(max, scores[j]);
        }
        double sum = 0.0;
        for (int32_t j = first; j < visible; ++j) sum += (scores[j] = std::exp(scores[j] - max));
        for (int64_t d = 0; d < kHeadDim; ++d) {
          double acc = 0.0;
          for (int32_t j = first; j < visible; ++j) acc += scores[j] * v[(j * kKvHeads + g) * kHeadDim + d];
          out[(t * kHeads + h) * kHeadDim + d] = acc / sum;
        }
      }
    }
  }
  return out;
}

// A dot product of f16 values summed as ggml's AVX2 code does: for one-token
// batches ggml_vec_dot_f16 (lane i % 32 of 4 x 8 FMA accumulators, folded
// (a0 + a2) + (a1 + a3), then (t0 + t1) + (t2 + t3) with t_i = v_i + v_{i+4},
// the n % 32 rest added in double), else tinyBLAS (lane i % 8 of one
// accumulator, then (t0 + t2) + (t1 + t3)). x is read with a stride.
float GgmlDot(bool vec_dot, const float* x, int64_t stride, const float* y, int64_t n) {
  if (!vec_dot && n % 8 == 0) {
    float acc[8] = {};
    for (int64_t i = 0; i < n; ++i) acc[i % 8] = std::fma(x[i * stride], y[i], acc[i % 8]);
    return ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
  }
  float acc[4][8] = {};
  const int64_t full = n / 32 * 32;
  for (int64_t i = 0; i < full; ++i) acc[i % 32 / 8][i % 8] = std::fma(x[i * stride], y[i], acc[i % 32 / 8][i % 8]);
  float v[8];
  for (int l = 0; l < 8; ++l) v[l] = (acc[0][l] + acc[2][l]) + (acc[1][l] + acc[3][l]);
  double sum = ((v[0] + v[4]) + (v[1] + v[5])) + ((v[2] + v[6]) + (v[3] + v[7]));
  for (int64_t i = full; i < n; ++i) sum += static_cast<double>(x[i * stride] * y[i]);
  return static_cast<float>(sum);
}

float RoundToHalf(float x) { return quant::HalfToFloat(quant::FloatToHalf(x)); }

// llama.cpp's non-flash attention on an f16 cache (AVX2), from the
// sequences' contiguous copies: q and the probabilities rounded to f16, the
// exp sums per 8 folded in f32 and added in double, rows padded with zeros to
// a multiple of 32. `vec_dot(rows)` picks the dot order for a sequence with
// that many rows in the step.
template <class Order>
std::vector<float> GgmlAttention(const Cache& cache, const Step& step, const std::vector<size_t>& which, float scale,
                                 const Order& vec_dot, int64_t window = 0, float softcap = 0.0f) {
  std::vector<float> out(step.query.size());
  for (size_t i = 0; i < which.size(); ++i) {
    const std::vector<float>& k = cache.keys[which[i]];
    const std::vector<float>& v = cache.values[which[i]];
    const bool order = vec_dot(step.seq_starts[i + 1] - step.seq_starts[i]);
    for (int32_t t = step.seq_starts[i]; t < step.seq_starts[i + 1]; ++t) {
      const int64_t visible = step.positions[t] + 1;
      const int64_t padded = (visible + 31) / 32 * 32;
      for (int64_t h = 0; h < kHeads; ++h) {
        const int64_t g = h / (kHeads / kKvHeads);
        std::vector<float> q(kHeadDim);
        for (int64_t d = 0; d < kHeadDim; ++d) q[d] = RoundToHalf(step.query[(t * kHeads + h) * kHeadDim + d]);
        // Keys outside the window are masked (-inf): exponential 0.
        std::vector<float> e(padded, 0.0f);
        float max = -INFINITY;
        const int64_t first = FirstKey(step.positions[t], window);
        for (int64_t j = first; j < visible; ++j) {
          e[j] = GgmlDot(order, &k[(j * kKvHeads + g) * kHeadDim], 1, q.data(), kHeadDim) * scale;
          // llama.cpp's soft cap: ggml_scale by 1 / cap, ggml_tanh, ggml_scale by cap.
          if (softcap > 0) e[j] = std::tanh(e[j] * (1.0f / softcap)) * softcap;
          max = std::max(max, e[j]);
        }
        for (int64_t j = first; j < visible; ++j) e[j] = FastExp(e[j] - max);
        double sum = 0.0;
        for (int64_t j = 0; j < padded; j += 8) {
          sum += ((e[j] + e[j + 4]) + (e[j + 2] + e[j + 6])) + ((e[j + 1] + e[j + 5]) + (e[j + 3] + e[j + 7]));
        }
        const float inverse = static_cast<float>(1.0 / sum);
        std::vector<float> p(padded, 0.0f), padded_v(padded * kKvHeads * kHeadDim, 0.0f);
        for (int64_t j = first; j < visible; ++j) p[j] = RoundToHalf(e[j] * inverse);
        std::copy(v.begin(), v.begin() + visible * kKvHeads * kHeadDim, padded_v.begin());
        for (int64_t d = 0; d < kHeadDim; ++d) {
          out[(t * kHeads + h) * kHeadDim + d] =
              GgmlDot(order, &padded_v[g * kHeadDim + d], kKvHeads * kHeadDim, p.data(), padded);
        }
      }
    }
  }
  return out;
}

// PagedAttention.h's f32 order, written out one operation at a time: each
// score the 8-lane dot product (lane i % 8, folded ((l0 + l4) + (l2 + l6)) +
// ((l1 + l5) + (l3 + l7)), the tail added after), times the scale; the
// denominator in 8 lanes by key position, folded the same way; the weighted
// sum of values in key order, times the denominator's inverse.
float FoldEightLanes(const float lanes[8]) {
  return ((lanes[0] + lanes[4]) + (lanes[2] + lanes[6])) + ((lanes[1] + lanes[5]) + (lanes[3] + lanes[7]));
}

std::vector<float> OrderedFloatAttention(const Cache& cache, const Step& step, const std::vector<size_t>& which,
                                         float scale, int64_t window) {
  std::vector<float> out(step.query.size());
  for (size_t i = 0; i < which.size(); ++i) {
    const std::vector<float>& k = cache.keys[which[i]];
    const std::vector<float>& v = cache.values[which[i]];
    for (int32_t t = step.seq_starts[i]; t < step.seq_starts[i + 1]; ++t) {
      const int32_t visible = step.positions[t] + 1;
      const int32_t first = FirstKey(step.positions[t], window);
      for (int64_t h = 0; h < kHeads; ++h) {
        const int64_t g = h / (kHeads / kKvHeads);
        const float* q = &step.query[(t * kHeads + h) * kHeadDim];
        std::vector<float> e(visible, 0.0f);
        float max = -INFINITY;
        for (int32_t j = first; j < visible; ++j) {
          const float* key = &k[(j * kKvHeads + g) * kHeadDim];
          float lanes[8] = {};
          const int64_t full = kHeadDim / 8 * 8;
          for (int64_t d = 0; d < full; ++d) {
            const float product = key[d] * q[d];
            lanes[d % 8] = lanes[d % 8] + product;
          }
          float dot = FoldEightLanes(lanes);
          for (int64_t d = full; d < kHeadDim; ++d) {
            const float product = key[d] * q[d];
            dot = dot + product;
          }
          e[j] = scale * dot;
          max = std::max(max, e[j]);
        }
        float lanes[8] = {};
        for (int32_t j = first; j < visible; ++j) {
          e[j] = FastExp(e[j] - max);
          lanes[j % 8] = lanes[j % 8] + e[j];
        }
        const float inverse = 1.0f / FoldEightLanes(lanes);
        for (int64_t d = 0; d < kHeadDim; ++d) {
          float sum = 0.0f;
          for (int32_t j = first; j < visible; ++j) {
            const float product = e[j] * v[(j * kKvHeads + g) * kHeadDim + d];
            sum = sum + product;
          }
          out[(t * kHeads + h) * kHeadDim + d] = sum * inverse;
        }
      }
    }
  }
  return out;
}

const std::vector<size_t> kAllSequences = {0, 1, 2, 3};

// Decodes (one row) sum as ggml_vec_dot_f16, prefills as tinyBLAS: llama.cpp's
// bits for either batch. The swapped orders give other bits, so the test
// tells the two apart (kHeadDim = 40 also exercises ggml_vec_dot_f16's tail).
TEST(PagedAttentionF16Test, FollowsGgmlsOrderForDecodeAndPrefill) {
  const Cache cache = BuildCache(kvx::StorageType::F16, 4);
  const Step step = MakeStep(cache, kAllSequences, 300);
  const float scale = 1.0f / std::sqrt(static_cast<float>(kHeadDim));
  const std::vector<float> out = Attend(cache, step, scale, 2);
  EXPECT_TRUE(AllEqual(out, GgmlAttention(cache, step, kAllSequences, scale, [](int32_t rows) { return rows == 1; })));
  const std::vector<float> swapped =
      GgmlAttention(cache, step, kAllSequences, scale, [](int32_t rows) { return rows != 1; });
  for (size_t s : kAllSequences) {
    const auto begin = step.seq_starts[s] * kHeads * kHeadDim, end = step.seq_starts[s + 1] * kHeads * kHeadDim;
    EXPECT_FALSE(std::equal(out.begin() + begin, out.begin() + end, swapped.begin() + begin)) << "sequence " << s;
  }
}

// The f32 cache's kernels (AVX-512, AVX2 or portable, whichever this CPU
// takes) give the documented order's bits, with and without a window that
// starts keys off a lane boundary, for thread counts whose chunks split a kv
// head's group of query heads (attended together) at different heads.
TEST(PagedAttentionF32Test, FollowsTheDocumentedOrder) {
  const Cache cache = BuildCache(kvx::StorageType::F32, 10);
  const Step step = MakeStep(cache, kAllSequences, 1000);
  const float scale = 1.0f / std::sqrt(static_cast<float>(kHeadDim));
  for (int threads : {1, 2, 3, 4}) {
    for (int64_t window : {int64_t{0}, int64_t{13}, int64_t{45}}) {
      SCOPED_TRACE(::testing::Message() << threads << " threads, window " << window);
      EXPECT_TRUE(AllEqual(Attend(cache, step, scale, threads, window),
                           OrderedFloatAttention(cache, step, kAllSequences, scale, window)));
    }
  }
}

// A group of query heads larger than one pass of the grouped kernels takes
// (10 per kv head) gives each head the bits it gets alone: attended as the
// only query head of its kv head, in a query of kKvHeads heads.
TEST(PagedAttentionF32Test, LargeGroupsGiveEachHeadItsBitsAlone) {
  constexpr int64_t kWideHeads = 10 * kKvHeads;
  const Cache cache = BuildCache(kvx::StorageType::F32, 11);
  const Step step = MakeStep(cache, kAllSequences, 1100);
  const PagedAttentionBatch batch = step.Batch(cache.max_blocks);
  const float scale = 1.0f / std::sqrt(static_cast<float>(kHeadDim));
  std::mt19937 rng(12);
  std::normal_distribution<float> normal;
  std::vector<float> wide(static_cast<size_t>(step.tokens * kWideHeads * kHeadDim));
  for (float& x : wide) x = normal(rng);
  auto attend = [&](const std::vector<float>& query, int64_t heads, int threads) {
    ThreadPool pool(threads);
    std::vector<float> out(query.size(), std::nanf(""));
    const absl::Status status = PagedAttention(query.data(), step.tokens, heads, cache.layout, kLayer,
                                               cache.pool.data(), kPoolBlocks, batch, scale, 0, 0.0f, out.data(), pool);
    EXPECT_TRUE(status.ok()) << status;
    return out;
  };
  std::vector<float> alone(wide.size());
  for (int64_t h = 0; h < kWideHeads; ++h) {
    const int64_t g = h / (kWideHeads / kKvHeads);
    std::vector<float> narrow(static_cast<size_t>(step.tokens * kKvHeads * kHeadDim));
    for (int64_t t = 0; t < step.tokens; ++t) {
      for (int64_t k = 0; k < kKvHeads; ++k) {
        std::copy_n(wide.begin() + (t * kWideHeads + h) * kHeadDim, kHeadDim,
                    narrow.begin() + (t * kKvHeads + k) * kHeadDim);
      }
    }
    const std::vector<float> out = attend(narrow, kKvHeads, 1);
    for (int64_t t = 0; t < step.tokens; ++t) {
      std::copy_n(out.begin() + (t * kKvHeads + g) * kHeadDim, kHeadDim, alone.begin() + (t * kWideHeads + h) * kHeadDim);
    }
  }
  for (int threads : {1, 2, 3}) {
    EXPECT_TRUE(AllEqual(attend(wide, kWideHeads, threads), alone)) << threads << " threads";
  }
}

class PagedAttentionTest : public ::testing::TestWithParam<kvx::StorageType> {};

// The f32 online softmax rounds a few times per key; with <= 70 keys of
// N(0, 1) values the output error stays far below 2e-5 (values are O(1)).
// The f16 path rounds each probability to f16 (2^-11 relative), as llama.cpp
// does: the output moves by up to 2^-11 * max |v|, so about 1e-3.
TEST_P(PagedAttentionTest, MatchesContiguousNaiveAttention) {
  const Cache cache = BuildCache(GetParam(), 1);
  const Step step = MakeStep(cache, kAllSequences, 100);
  const float scale = 1.0f / std::sqrt(static_cast<float>(kHeadDim));
  const std::vector<float> out = Attend(cache, step, scale, 3);
  const std::vector<double> expected = NaiveAttention(cache, step, kAllSequences, scale);
  const double tolerance = GetParam() == kvx::StorageType::F32 ? 2e-5 : 1e-3;
  EXPECT_TRUE(AllClose(out, expected, Absolute(tolerance)));
}

TEST_P(PagedAttentionTest, ResultsDoNotDependOnThreadsOrBatch) {
  const Cache cache = BuildCache(GetParam(), 2);
  const Step step = MakeStep(cache, kAllSequences, 200);
  const std::vector<float> together = Attend(cache, step, 0.2f, 1);
  EXPECT_TRUE(AllEqual(Attend(cache, step, 0.2f, 2), together)) << "2 threads";
  EXPECT_TRUE(AllEqual(Attend(cache, step, 0.2f, 3), together)) << "3 threads";
  for (size_t s : kAllSequences) {
    const Step alone = MakeStep(cache, {s}, 200);
    const std::vector<float> out = Attend(cache, alone, 0.2f, 2);
    const size_t offset = static_cast<size_t>(step.seq_starts[s] * kHeads * kHeadDim);
    EXPECT_TRUE(AllEqual(out, absl::MakeConstSpan(together).subspan(offset, out.size()))) << "sequence " << s;
  }
}

// A window of 20 positions (the query at p sees p - 19..p): sequences of 37
// and 70 tokens lose their early keys, the 5- and 16-token ones keep all.
constexpr int64_t kWindow = 20;

TEST_P(PagedAttentionTest, SlidingWindowMatchesNaiveAttentionOverTheWindow) {
  const Cache cache = BuildCache(GetParam(), 5);
  const Step step = MakeStep(cache, kAllSequences, 500);
  const float scale = 1.0f / std::sqrt(static_cast<float>(kHeadDim));
  const std::vector<float> out = Attend(cache, step, scale, 2, kWindow);
  const double tolerance = GetParam() == kvx::StorageType::F32 ? 2e-5 : 1e-3;
  EXPECT_TRUE(AllClose(out, NaiveAttention(cache, step, kAllSequences, scale, kWindow), Absolute(tolerance)));
  // The window matters: over the whole context the long sequences differ.
  EXPECT_FALSE(AllClose(out, NaiveAttention(cache, step, kAllSequences, scale), Absolute(1e-2)));
}

// Blocks wholly before every query's window may have gone back to the pool:
// entries pointing outside it are neither read nor refused, and the
// results stay the same bits.
TEST_P(PagedAttentionTest, SlidingWindowReadsNoBlockBeforeTheWindow) {
  const Cache cache = BuildCache(GetParam(), 6);
  Step step = MakeStep(cache, kAllSequences, 600);
  const std::vector<float> intact = Attend(cache, step, 0.2f, 2, kWindow);
  int64_t released = 0;
  for (size_t s = 0; s < kAllSequences.size(); ++s) {
    const int32_t first = FirstKey(step.positions[step.seq_starts[s]], kWindow);
    for (int64_t b = 0; (b + 1) * kBlockSize <= first; ++b, ++released) {
      step.block_tables[s * cache.max_blocks + b] = -1;
    }
  }
  ASSERT_EQ(released, 3) << "the 70-token sequence's first three blocks";
  EXPECT_TRUE(AllEqual(Attend(cache, step, 0.2f, 2, kWindow), intact));
}

TEST(PagedAttentionF16Test, SlidingWindowFollowsGgmlsMaskedRow) {
  const Cache cache = BuildCache(kvx::StorageType::F16, 7);
  const Step step = MakeStep(cache, kAllSequences, 700);
  const float scale = 1.0f / std::sqrt(static_cast<float>(kHeadDim));
  EXPECT_TRUE(AllEqual(Attend(cache, step, scale, 2, kWindow),
                       GgmlAttention(
                           cache, step, kAllSequences, scale, [](int32_t rows) { return rows == 1; }, kWindow)));
}

// A cap of 0.5 on scores of about N(0, 1): tanh bends most of them, so
// capped and uncapped attention differ well beyond the tolerances.
constexpr float kSoftcap = 0.5f;

TEST_P(PagedAttentionTest, SoftcapMatchesNaiveAttentionOfCappedScores) {
  const Cache cache = BuildCache(GetParam(), 8);
  const Step step = MakeStep(cache, kAllSequences, 800);
  const float scale = 1.0f / std::sqrt(static_cast<float>(kHeadDim));
  const std::vector<float> out = Attend(cache, step, scale, 2, kWindow, kSoftcap);
  const double tolerance = GetParam() == kvx::StorageType::F32 ? 2e-5 : 1e-3;
  EXPECT_TRUE(AllClose(out, NaiveAttention(cache, step, kAllSequences, scale, kWindow, kSoftcap),
                       Absolute(tolerance)));
  EXPECT_FALSE(AllClose(out, NaiveAttention(cache, step, kAllSequences, scale, kWindow), Absolute(1e-2)));
}

TEST(PagedAttentionF16Test, SoftcapFollowsGgmlsScaleTanhScale) {
  const Cache cache = BuildCache(kvx::StorageType::F16, 9);
  const Step step = MakeStep(cache, kAllSequences, 900);
  const float scale = 1.0f / std::sqrt(static_cast<float>(kHeadDim));
  EXPECT_TRUE(AllEqual(Attend(cache, step, scale, 2, /*window=*/0, kSoftcap),
                       GgmlAttention(
                           cache, step, kAllSequences, scale, [](int32_t rows) { return rows == 1; }, 0, kSoftcap)));
}

INSTANTIATE_TEST_SUITE_P(F32AndF16, PagedAttentionTest, ::testing::Values(kvx::StorageType::F32, kvx::StorageType::F16),
                         [](const ::testing::TestParamInfo<kvx::StorageType>& info) {
                           return info.param == kvx::StorageType::F32 ? "f32" : "f16";
                         });

// The documented layout, computed here from its definition, not from the
// header's helpers: block b, layer l, K then V, slot s, kv head g.
TEST(WriteKvTest, StoresAtTheDocumentedOffsetsAndNowhereElse) {
  const PagedKvLayout layout{kLayers, kKvHeads, kHeadDim, kBlockSize, kvx::StorageType::F32, kvx::StorageType::F32};
  const int64_t elem = 4;
  EXPECT_EQ(layout.BlockBytes(), 2 * kLayers * kKvHeads * kHeadDim * kBlockSize * elem);
  EXPECT_EQ(layout.LayerStride(), 2 * kBlockSize * kKvHeads * kHeadDim * elem);
  EXPECT_EQ(layout.ValueOffset(), kBlockSize * kKvHeads * kHeadDim * elem);
  EXPECT_EQ(layout.KeySlotStride(), kKvHeads * kHeadDim * elem);
  EXPECT_EQ(layout.ValueSlotStride(), kKvHeads * kHeadDim * elem);

  std::vector<uint8_t> pool_bytes(static_cast<size_t>(4 * layout.BlockBytes()), 0);
  std::vector<float> key(kKvHeads * kHeadDim), value(key.size());
  for (size_t i = 0; i < key.size(); ++i) {
    key[i] = 1.0f + i;
    value[i] = -1.0f - i;
  }
  const int32_t slot = 2 * kBlockSize + 5;  // block 2, slot 5
  ThreadPool pool(1);
  ASSERT_TRUE(WriteKv(key.data(), value.data(), 1, &slot, layout, kLayer, pool_bytes.data(), 4, pool).ok());
  const int64_t key_offset = 2 * (2 * kLayers * kKvHeads * kHeadDim * kBlockSize * elem) +
                             kLayer * (2 * kBlockSize * kKvHeads * kHeadDim * elem) + 5 * kKvHeads * kHeadDim * elem;
  const int64_t value_offset = key_offset + kBlockSize * kKvHeads * kHeadDim * elem;
  const int64_t run = kKvHeads * kHeadDim * elem;
  EXPECT_EQ(std::memcmp(pool_bytes.data() + key_offset, key.data(), run), 0);
  EXPECT_EQ(std::memcmp(pool_bytes.data() + value_offset, value.data(), run), 0);
  int64_t nonzero = 0;
  for (uint8_t byte : pool_bytes) nonzero += byte != 0;
  int64_t written = 0;
  for (int64_t i = 0; i < run; ++i) written += (pool_bytes[key_offset + i] != 0) + (pool_bytes[value_offset + i] != 0);
  EXPECT_EQ(nonzero, written);
}

TEST(WriteKvTest, RoundsToNearestEvenHalf) {
  const PagedKvLayout layout{1, 1, 2, 4, kvx::StorageType::F16, kvx::StorageType::F16};
  std::vector<uint8_t> pool_bytes(static_cast<size_t>(layout.BlockBytes()));
  const float key[2] = {1.0f + 1.0f / 4096, 3.14159f}, value[2] = {-2.0f, 65504.0f};
  const int32_t slot = 0;
  ThreadPool pool(1);
  ASSERT_TRUE(WriteKv(key, value, 1, &slot, layout, 0, pool_bytes.data(), 1, pool).ok());
  uint16_t stored[2];
  std::memcpy(stored, pool_bytes.data(), sizeof stored);
  EXPECT_EQ(stored[0], quant::FloatToHalf(key[0]));
  EXPECT_EQ(stored[1], quant::FloatToHalf(key[1]));
}

TEST(PagedAttentionErrors, RejectsBadMetadataBeforeReadingTheCache) {
  const Cache cache = BuildCache(kvx::StorageType::F32, 3);
  const float scale = 0.1f;
  std::vector<float> out(19 * kHeads * kHeadDim);
  ThreadPool pool(1);
  const auto run = [&](const Step& step, int64_t heads) {
    return PagedAttention(step.query.data(), step.tokens, heads, cache.layout, kLayer, cache.pool.data(), kPoolBlocks,
                          step.Batch(cache.max_blocks), scale, /*window=*/0, /*softcap=*/0.0f, out.data(), pool);
  };
  Step step = MakeStep(cache, {0}, 1);
  EXPECT_THAT(run(step, 5).message(), HasSubstr("heads must be a positive multiple of kv_heads (2)"));

  Step future = step;
  future.positions[1] = 37;
  EXPECT_THAT(run(future, kHeads).message(), HasSubstr("token 1 of sequence 0 has position 37, outside its context 0..36"));

  Step bad_block = step;
  bad_block.block_tables[2] = kPoolBlocks;
  EXPECT_THAT(run(bad_block, kHeads).message(), HasSubstr("sequence 0 block 2 is 24, outside the pool's 24 blocks"));

  Step bad_starts = step;
  bad_starts.seq_starts[1] = 3;
  EXPECT_THAT(run(bad_starts, kHeads).message(), HasSubstr("seq_starts must run from 0 to 19"));

  EXPECT_THAT(PagedAttention(step.query.data(), step.tokens, kHeads, cache.layout, kLayer, cache.pool.data(),
                             kPoolBlocks, step.Batch(cache.max_blocks), scale, /*window=*/0, /*softcap=*/-1.0f,
                             out.data(), pool)
                  .message(),
              HasSubstr("softcap -1 is not 0 or positive and finite"));

  const int32_t slot = static_cast<int32_t>(kPoolBlocks * kBlockSize);
  std::vector<float> kv(kKvHeads * kHeadDim);
  std::vector<uint8_t> pool_bytes(cache.pool);
  EXPECT_THAT(WriteKv(kv.data(), kv.data(), 1, &slot, cache.layout, 0, pool_bytes.data(), kPoolBlocks, pool).message(),
              HasSubstr("WriteKv: token 0 maps to slot 384, outside the pool's 384 slots"));
}

}  // namespace
}  // namespace kvjit::cpu
