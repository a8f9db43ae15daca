#include "runtime/cpu/HalfDot.h"

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/quant/Half.h"

namespace kvjit::cpu {
namespace {

struct Operands {
  std::vector<uint16_t> x;  // f16 bits
  std::vector<float> y;     // f16 values
};

Operands RandomOperands(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  Operands operands;
  for (int64_t i = 0; i < n; ++i) {
    operands.x.push_back(quant::FloatToHalf(normal(rng)));
    operands.y.push_back(quant::HalfToFloat(quant::FloatToHalf(normal(rng))));
  }
  return operands;
}

const uint8_t* Bytes(const std::vector<uint16_t>& halves) { return reinterpret_cast<const uint8_t*>(halves.data()); }

// ggml_vec_dot_f16 on AVX2, written out register by register.
float ReferenceVecDot(const Operands& o) {
  const int64_t n = static_cast<int64_t>(o.x.size());
  const int64_t full = n / 32 * 32;
  float acc[4][8] = {};
  for (int64_t i = 0; i < full; i += 32) {
    for (int j = 0; j < 4; ++j) {
      for (int l = 0; l < 8; ++l) {
        const int64_t e = i + 8 * j + l;
        acc[j][l] = std::fma(quant::HalfToFloat(o.x[e]), o.y[e], acc[j][l]);
      }
    }
  }
  float v[8];
  for (int l = 0; l < 8; ++l) v[l] = (acc[0][l] + acc[2][l]) + (acc[1][l] + acc[3][l]);
  const float t0 = v[0] + v[4], t1 = v[1] + v[5], t2 = v[2] + v[6], t3 = v[3] + v[7];
  double sum = (t0 + t1) + (t2 + t3);
  for (int64_t e = full; e < n; ++e) sum += static_cast<double>(quant::HalfToFloat(o.x[e]) * o.y[e]);
  return static_cast<float>(sum);
}

// llamafile's tinyBLAS on AVX2: one register of 8 lanes.
float ReferenceTinyBlas(const Operands& o) {
  float acc[8] = {};
  for (size_t e = 0; e < o.x.size(); ++e) acc[e % 8] = std::fma(quant::HalfToFloat(o.x[e]), o.y[e], acc[e % 8]);
  const float t0 = acc[0] + acc[4], t1 = acc[1] + acc[5], t2 = acc[2] + acc[6], t3 = acc[3] + acc[7];
  return (t0 + t2) + (t1 + t3);
}

std::vector<const internal::HalfDotKernels*> AllKernels() {
  std::vector<const internal::HalfDotKernels*> kernels = {&internal::PortableHalfDotKernels()};
  if (internal::Avx2HalfDotKernels() != nullptr) kernels.push_back(internal::Avx2HalfDotKernels());
  if (internal::Avx512HalfDotKernels() != nullptr) kernels.push_back(internal::Avx512HalfDotKernels());
  return kernels;
}

TEST(HalfDotTest, FollowsGgmlsOrdersBitForBit) {
  int orders_disagree = 0;
  for (int64_t n : {8, 32, 40, 64, 100, 128, 264}) {
    for (uint32_t seed = 0; seed < 5; ++seed) {
      const Operands o = RandomOperands(n, seed * 1000 + static_cast<uint32_t>(n));
      const float vec_dot = ReferenceVecDot(o);
      // tinyBLAS takes only multiples of 8; ggml then uses ggml_vec_dot_f16.
      const float tiny_blas = n % 8 == 0 ? ReferenceTinyBlas(o) : vec_dot;
      orders_disagree += vec_dot != tiny_blas;
      for (const internal::HalfDotKernels* kernels : AllKernels()) {
        float got[2];
        kernels->dot_rows(HalfDotOrder::kVecDot, Bytes(o.x), 0, 1, o.y.data(), n, &got[0]);
        kernels->dot_rows(HalfDotOrder::kTinyBlas, Bytes(o.x), 0, 1, o.y.data(), n, &got[1]);
        EXPECT_EQ(got[0], vec_dot) << "n " << n;
        EXPECT_EQ(got[1], tiny_blas) << "n " << n;
      }
    }
  }
  // The orders must matter on random data, or the comparisons above show nothing.
  EXPECT_GT(orders_disagree, 5);
}

TEST(HalfDotTest, TinyBlasFallsBackToVecDotOffMultiplesOfEight) {
  const Operands o = RandomOperands(37, 3);
  float got;
  HalfDotRows(HalfDotOrder::kTinyBlas, Bytes(o.x), 0, 1, o.y.data(), 37, &got);
  EXPECT_EQ(got, ReferenceVecDot(o));
}

// Rows at a byte stride (here 3 rows of 64 values, 80 values apart), each
// against the same y.
TEST(HalfDotTest, RowsAreReadAtTheirStride) {
  const Operands o = RandomOperands(240, 5);
  for (HalfDotOrder order : {HalfDotOrder::kVecDot, HalfDotOrder::kTinyBlas}) {
    float all[3];
    HalfDotRows(order, Bytes(o.x), 160, 3, o.y.data(), 64, all);
    for (int r = 0; r < 3; ++r) {
      float one;
      HalfDotRows(order, Bytes(o.x) + 160 * r, 0, 1, o.y.data(), 64, &one);
      EXPECT_EQ(all[r], one) << "row " << r;
      Operands row;
      row.x.assign(o.x.begin() + 80 * r, o.x.begin() + 80 * r + 64);
      row.y.assign(o.y.begin(), o.y.begin() + 64);
      EXPECT_EQ(one, order == HalfDotOrder::kVecDot ? ReferenceVecDot(row) : ReferenceTinyBlas(row)) << "row " << r;
    }
  }
}

// Rows 5, 6, 7 of a product go to lanes 5 % 3 = 2, 0 and 1, one FMA each.
TEST(HalfDotTest, AxpyRowsFeedTheirElementsLanes) {
  constexpr int64_t kN = 43, kRowBytes = 2 * 50;
  const Operands o = RandomOperands(150, 9);
  const float a[3] = {0.3125f, -1.5f, 2.0f};
  for (const internal::HalfDotKernels* kernels : AllKernels()) {
    std::vector<float> lanes(3 * kN);
    for (size_t i = 0; i < lanes.size(); ++i) lanes[i] = o.y[i];
    kernels->axpy_rows(Bytes(o.x), kRowBytes, 3, a, kN, lanes.data(), 3, 5);
    for (int r = 0; r < 3; ++r) {
      const int64_t lane = (5 + r) % 3;
      for (int64_t i = 0; i < kN; ++i) {
        ASSERT_EQ(lanes[lane * kN + i], std::fma(quant::HalfToFloat(o.x[50 * r + i]), a[r], o.y[lane * kN + i]))
            << "row " << r << ", element " << i;
      }
    }
  }
}

// tinyBLAS's eight lanes over whole slices of columns (64, as a head of 64,
// and 128), for runs of 1 to 19 rows starting at every lane: every kernel
// gives the portable loop's bits, lane by lane.
TEST(HalfDotTest, AxpyRowsOverEightLanesEqualTheRowByRowLoop) {
  for (const int64_t n : {64, 128}) {
    const int64_t row_bytes = 2 * n + 16;
    const Operands o = RandomOperands(static_cast<size_t>(19 * (n + 8)), 11);
    std::vector<float> a(19);
    for (size_t r = 0; r < a.size(); ++r) a[r] = o.y[r] * 0.25f;
    for (int64_t rows = 1; rows <= 19; ++rows) {
      for (int64_t first = 0; first < 9; ++first) {
        std::vector<float> expected(8 * n);
        for (size_t i = 0; i < expected.size(); ++i) expected[i] = o.y[i % o.y.size()];
        std::vector<float> start = expected;
        internal::PortableHalfDotKernels().axpy_rows(Bytes(o.x), row_bytes, rows, a.data(), n, expected.data(), 8,
                                                     first);
        for (const internal::HalfDotKernels* kernels : AllKernels()) {
          std::vector<float> lanes = start;
          kernels->axpy_rows(Bytes(o.x), row_bytes, rows, a.data(), n, lanes.data(), 8, first);
          for (size_t i = 0; i < lanes.size(); ++i) {
            ASSERT_EQ(lanes[i], expected[i]) << "n " << n << ", rows " << rows << ", first " << first << ", lane "
                                             << i / n << ", element " << i % n;
          }
        }
      }
    }
  }
}

// kVecDot over many rows (a decode step's keys): every kernel gives each row
// and query ggml's bits, for row counts at and either side of the sixteen
// that AVX-512 folds together, 1 to 3 queries (pairs and one alone), lengths
// of whole 32-lane steps and one with a tail.
TEST(HalfDotTest, VecDotRowsEqualTheReferenceRowByRow) {
  for (const int64_t n : {32, 96, 128, 256, 40}) {
    const int64_t row_bytes = 2 * n + 64;
    constexpr int64_t kMostRows = 40;
    const Operands keys = RandomOperands(kMostRows * row_bytes / 2, 41);
    const Operands queries = RandomOperands(3 * n, 42);
    for (const int64_t rows : {1, 15, 16, 17, 40}) {
      for (int64_t count = 1; count <= 3; ++count) {
        for (const internal::HalfDotKernels* kernels : AllKernels()) {
          std::vector<float> out(count * kMostRows, -1.0f);
          kernels->dot_rows_queries(HalfDotOrder::kVecDot, Bytes(keys.x), row_bytes, rows, queries.y.data(), count, n,
                                    out.data(), kMostRows);
          for (int64_t q = 0; q < count; ++q) {
            for (int64_t r = 0; r < kMostRows; ++r) {
              if (r >= rows) {
                ASSERT_EQ(out[q * kMostRows + r], -1.0f) << "written past row " << rows;
                continue;
              }
              Operands row;
              row.x.assign(keys.x.begin() + r * row_bytes / 2, keys.x.begin() + r * row_bytes / 2 + n);
              row.y.assign(queries.y.begin() + q * n, queries.y.begin() + (q + 1) * n);
              ASSERT_EQ(out[q * kMostRows + r], ReferenceVecDot(row))
                  << "n " << n << ", rows " << rows << ", query " << q << " of " << count << ", row " << r;
            }
          }
        }
      }
    }
  }
}

// The queries' forms give each query the bits of its own single-query call,
// in both orders, for 1 to 7 queries (past the four a pass takes), an odd
// number of key rows, and lengths of whole registers and not.
TEST(HalfDotTest, QueriesFormsEqualEachQueryAlone) {
  for (const int64_t n : {64, 128, 40, 43}) {
    const int64_t row_bytes = 2 * n + 16;
    constexpr int64_t kRows = 9;
    const Operands keys = RandomOperands(kRows * (n + 8), 21);
    const Operands queries = RandomOperands(7 * n, 22);
    std::vector<float> rounded(queries.y.size());
    RoundToHalfRow(queries.y.data(), rounded.data(), static_cast<int64_t>(rounded.size()));
    for (const internal::HalfDotKernels* kernels : AllKernels()) {
      for (const HalfDotOrder order : {HalfDotOrder::kTinyBlas, HalfDotOrder::kVecDot}) {
        for (int64_t count = 1; count <= 7; ++count) {
          std::vector<float> together(count * kRows), alone(kRows);
          kernels->dot_rows_queries(order, Bytes(keys.x), row_bytes, kRows, rounded.data(), count, n,
                                    together.data(), kRows);
          for (int64_t q = 0; q < count; ++q) {
            kernels->dot_rows(order, Bytes(keys.x), row_bytes, kRows, rounded.data() + q * n, n, alone.data());
            for (int64_t r = 0; r < kRows; ++r) {
              ASSERT_EQ(together[q * kRows + r], alone[r]) << "n " << n << ", query " << q << " of " << count
                                                           << ", row " << r;
            }
          }
        }
      }
      for (const int lane_count : {8, 32}) {
        const int64_t count = 3, a_stride = kRows + 5, lanes_stride = lane_count * n + 8;
        std::vector<float> a(count * a_stride);
        for (size_t i = 0; i < a.size(); ++i) a[i] = queries.y[i] * 0.5f;
        std::vector<float> together(count * lanes_stride);
        for (size_t i = 0; i < together.size(); ++i) together[i] = queries.y[i % queries.y.size()];
        const std::vector<float> start = together;
        kernels->axpy_rows_queries(Bytes(keys.x), row_bytes, kRows, a.data(), a_stride, count, n, together.data(),
                                   lanes_stride, lane_count, 5);
        for (int64_t q = 0; q < count; ++q) {
          std::vector<float> alone(start.begin() + q * lanes_stride, start.begin() + (q + 1) * lanes_stride);
          kernels->axpy_rows(Bytes(keys.x), row_bytes, kRows, a.data() + q * a_stride, n, alone.data(), lane_count, 5);
          for (int64_t i = 0; i < lanes_stride; ++i) {
            ASSERT_EQ(together[q * lanes_stride + i], alone[i]) << "n " << n << ", lanes " << lane_count
                                                                << ", query " << q << ", element " << i;
          }
        }
      }
    }
  }
}

// The row-pointer form (the value rows of a paged cache, block after block)
// gives each set the bits of the strided form over the same rows in order,
// for 5 rows and 45 scattered in runs of 16 and alone, 1 to 5 sets, both lane
// counts and lengths of whole 16-float registers (AVX-512's kernel, passes of
// 128 columns, then 64, 32 and 16: 256 takes two, 112 three) and not.
TEST(HalfDotTest, RowPointersEqualTheStridedRows) {
  for (const int64_t n : {64, 128, 256, 112, 40}) {
    const int64_t row_bytes = 2 * n + 16;
    constexpr int64_t kRows = 45;
    const Operands values = RandomOperands(2 * kRows * (n + 8), 31);
    const Operands weights = RandomOperands(5 * 64, 32);
    // Rows 0..15 and 16..31 as two blocks placed in reverse, then 13 single
    // rows at every other slot.
    std::vector<const uint8_t*> rows(kRows);
    for (int64_t r = 0; r < kRows; ++r) {
      const int64_t slot = r < 16 ? 16 + r : r < 32 ? r - 16 : 32 + 2 * (r - 32);
      rows[r] = Bytes(values.x) + slot * row_bytes;
    }
    for (const int64_t count : {int64_t{5}, kRows}) {
      for (const int lane_count : {8, 32}) {
        for (int64_t sets = 1; sets <= 5; ++sets) {
          const int64_t a_stride = 64, lanes_stride = lane_count * n + 8;
          std::vector<float> start(sets * lanes_stride);
          for (size_t i = 0; i < start.size(); ++i) start[i] = weights.y[i % weights.y.size()];
          std::vector<float> together = start, expected = start;
          HalfAxpyRowPointersQueries(rows.data(), count, weights.y.data(), a_stride, sets, n, together.data(),
                                     lanes_stride, lane_count, 3);
          for (int64_t r = 0; r < count; ++r) {
            HalfAxpyRowsQueries(rows[r], row_bytes, 1, weights.y.data() + r, a_stride, sets, n, expected.data(),
                                lanes_stride, lane_count, 3 + r);
          }
          for (size_t i = 0; i < together.size(); ++i) {
            ASSERT_EQ(together[i], expected[i]) << "n " << n << ", rows " << count << ", lanes " << lane_count
                                                << ", sets " << sets << ", element " << i;
          }
        }
      }
    }
  }
}

// Values whose f16 rounding is telling (ties, f16 subnormals, overflow),
// then 101 random ones: a length off a multiple of 8.
std::vector<float> HalfRoundingCases(uint32_t seed) {
  std::vector<float> x = {1.0f + 1.0f / 2048,  1.0f + 3.0f / 2048, 65504.0f, 65520.0f, 1e6f,   -1e6f,
                          std::ldexp(1.0f, -24), std::ldexp(3.0f, -26), 1e-9f,  -0.0f,   0.1f, -2.71828f};
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 100.0f);
  for (int i = 0; i < 101; ++i) x.push_back(normal(rng));
  return x;
}

// Every kernel rounds as the KV cache's FloatToHalf does.
TEST(HalfDotTest, RoundToHalfRoundsToNearestEven) {
  const std::vector<float> x = HalfRoundingCases(4);
  for (const internal::HalfDotKernels* kernels : AllKernels()) {
    std::vector<float> out(x.size());
    kernels->round_to_half(x.data(), out.data(), static_cast<int64_t>(x.size()));
    for (size_t i = 0; i < x.size(); ++i) {
      ASSERT_EQ(quant::FloatBits(out[i]), quant::FloatBits(quant::HalfToFloat(quant::FloatToHalf(x[i])))) << x[i];
    }
  }
}

// The KV cache's f16 store: FloatToHalf's bits for ties, subnormals,
// overflow and lengths off a multiple of 8; a NaN stays a NaN.
TEST(HalfDotTest, StoreHalfRowStoresFloatToHalfsBits) {
  std::vector<float> x = HalfRoundingCases(5);
  const size_t nan_at = x.size();
  x.push_back(std::nanf(""));
  for (const internal::HalfDotKernels* kernels : AllKernels()) {
    std::vector<uint8_t> out(2 * x.size(), 0xAB);
    kernels->store_half(x.data(), out.data(), static_cast<int64_t>(x.size()));
    for (size_t i = 0; i < x.size(); ++i) {
      const uint16_t bits = static_cast<uint16_t>(out[2 * i] | (out[2 * i + 1] << 8));
      if (i == nan_at) {
        EXPECT_TRUE(std::isnan(quant::HalfToFloat(bits)));
        continue;
      }
      ASSERT_EQ(bits, quant::FloatToHalf(x[i])) << x[i];
    }
  }
}

// Every kernel folds each column of the lane rows as FoldHalfDotLanes folds
// it alone, for column counts of whole registers and with a tail.
TEST(HalfDotTest, LaneRowFoldsEqualEachColumnsFold) {
  for (const int64_t n : {128, 40, 13}) {
    const Operands values = RandomOperands(32 * n, 51);
    for (const HalfDotOrder order : {HalfDotOrder::kVecDot, HalfDotOrder::kTinyBlas}) {
      for (const internal::HalfDotKernels* kernels : AllKernels()) {
        std::vector<float> out(n + 1, -1.0f);
        kernels->fold_lane_rows(order, values.y.data(), n, out.data());
        for (int64_t i = 0; i < n; ++i) {
          ASSERT_EQ(out[i], FoldHalfDotLanes(order, values.y.data() + i, n)) << "n " << n << ", column " << i;
        }
        EXPECT_EQ(out[n], -1.0f) << "written past column " << n;
      }
    }
  }
}

TEST(HalfDotTest, FoldsMatchTheDocumentedPairings) {
  // Powers of two far apart make every pairing's rounding visible.
  float lanes[32];
  for (int i = 0; i < 32; ++i) lanes[i] = std::ldexp(1.0f, (i * 7) % 32 - 8) * (i % 3 == 0 ? -1.0f : 1.0f);
  const float t[4] = {lanes[0] + lanes[4], lanes[1] + lanes[5], lanes[2] + lanes[6], lanes[3] + lanes[7]};
  EXPECT_EQ(SumEightLanes(lanes, 1), (t[0] + t[2]) + (t[1] + t[3]));
  EXPECT_EQ(FoldHalfDotLanes(HalfDotOrder::kTinyBlas, lanes, 1), SumEightLanes(lanes, 1));
  float v[8];
  for (int l = 0; l < 8; ++l) v[l] = (lanes[l] + lanes[16 + l]) + (lanes[8 + l] + lanes[24 + l]);
  const float u[4] = {v[0] + v[4], v[1] + v[5], v[2] + v[6], v[3] + v[7]};
  EXPECT_EQ(FoldHalfDotLanes(HalfDotOrder::kVecDot, lanes, 1), (u[0] + u[1]) + (u[2] + u[3]));
  float strided[64];
  for (int i = 0; i < 32; ++i) strided[2 * i] = lanes[i];
  EXPECT_EQ(FoldHalfDotLanes(HalfDotOrder::kVecDot, strided, 2),
            FoldHalfDotLanes(HalfDotOrder::kVecDot, lanes, 1));
  for (HalfDotOrder order : {HalfDotOrder::kVecDot, HalfDotOrder::kTinyBlas}) {
    // Two columns: `lanes` and its negation, folded side by side.
    float rows[64], folded[2];
    for (int i = 0; i < HalfDotLanes(order); ++i) {
      rows[2 * i] = lanes[i];
      rows[2 * i + 1] = -lanes[i];
    }
    FoldHalfDotLaneRows(order, rows, 2, folded);
    EXPECT_EQ(folded[0], FoldHalfDotLanes(order, lanes, 1));
    EXPECT_EQ(folded[1], -FoldHalfDotLanes(order, lanes, 1));
  }
  EXPECT_EQ(HalfDotLanes(HalfDotOrder::kVecDot), 32);
  EXPECT_EQ(HalfDotLanes(HalfDotOrder::kTinyBlas), 8);
}

}  // namespace
}  // namespace kvjit::cpu
