#include "runtime/cpu/FloatDot.h"

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace kvjit::cpu {
namespace {

// `rows` rows of n random floats, each padded to `stride` floats as the KV
// cache pads a head's row to its slot.
std::vector<float> RandomRows(int64_t rows, int64_t n, int64_t stride, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  std::vector<float> values(static_cast<size_t>(rows * stride), 1e30f);  // padding that would show
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i < n; ++i) values[r * stride + i] = normal(rng);
  }
  return values;
}

const uint8_t* Bytes(const std::vector<float>& v) { return reinterpret_cast<const uint8_t*>(v.data()); }

// FloatDot.h's order written out element by element.
float ReferenceScaledDot(const float* x, const float* y, int64_t n, float scale) {
  float lane[8] = {};
  const int64_t full = n / 8 * 8;
  for (int64_t i = 0; i < full; ++i) {
    const float product = x[i] * y[i];
    lane[i % 8] = lane[i % 8] + product;
  }
  float sum = ((lane[0] + lane[4]) + (lane[2] + lane[6])) + ((lane[1] + lane[5]) + (lane[3] + lane[7]));
  for (int64_t i = full; i < n; ++i) {
    const float product = x[i] * y[i];
    sum = sum + product;
  }
  return scale * sum;
}

uint32_t Bits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

std::vector<const internal::FloatDotKernels*> AllKernels() {
  std::vector<const internal::FloatDotKernels*> kernels = {&internal::PortableFloatDotKernels()};
  if (internal::Avx2FloatDotKernels() != nullptr) kernels.push_back(internal::Avx2FloatDotKernels());
  if (internal::Avx512FloatDotKernels() != nullptr) kernels.push_back(internal::Avx512FloatDotKernels());
  return kernels;
}

// Every query count up to past two passes of the AVX-512 kernel's three.
constexpr int64_t kQueryCounts[] = {1, 2, 3, 4, 7};

TEST(FloatDotTest, DotRowsFollowTheDocumentedOrderBitForBit) {
  const float scale = 0.125f;
  for (const internal::FloatDotKernels* kernels : AllKernels()) {
    for (int64_t queries : kQueryCounts) {
      for (int64_t n : {1, 7, 8, 9, 31, 64, 65, 100}) {
        const int64_t stride = n + 3;
        const int64_t rows = 19;  // two groups of eight rows and three single ones
        const int64_t out_stride = rows + 5;
        const std::vector<float> x = RandomRows(rows, n, stride, 17 + static_cast<uint32_t>(n));
        const std::vector<float> y = RandomRows(queries, n, n, 99 + static_cast<uint32_t>(n));
        std::vector<float> out(static_cast<size_t>(queries * out_stride), 1e30f);
        kernels->dot_rows(Bytes(x), stride * 4, rows, y.data(), queries, n, scale, out.data(), out_stride);
        for (int64_t q = 0; q < queries; ++q) {
          for (int64_t r = 0; r < rows; ++r) {
            SCOPED_TRACE(::testing::Message() << queries << " queries, n = " << n << ", query " << q << ", row " << r);
            EXPECT_EQ(Bits(out[q * out_stride + r]),
                      Bits(ReferenceScaledDot(x.data() + r * stride, y.data() + q * n, n, scale)));
          }
          // Past each query's rows nothing is written.
          for (int64_t r = rows; r < out_stride; ++r) EXPECT_EQ(out[q * out_stride + r], 1e30f);
        }
      }
    }
  }
}

TEST(FloatDotTest, AxpyRowsAccumulateInRowOrderBitForBit) {
  for (const internal::FloatDotKernels* kernels : AllKernels()) {
    for (int64_t queries : kQueryCounts) {
      for (int64_t n : {1, 7, 8, 9, 16, 17, 64, 65, 128, 130}) {
        const int64_t stride = n + 5;
        const int64_t rows = 7;
        const int64_t a_stride = rows + 2;
        const std::vector<float> x = RandomRows(rows, n, stride, 3 + static_cast<uint32_t>(n));
        const std::vector<float> a = RandomRows(queries, rows, a_stride, 5 + static_cast<uint32_t>(n));
        std::vector<float> acc = RandomRows(queries, n, n, 11);
        std::vector<float> expected = acc;
        for (int64_t q = 0; q < queries; ++q) {
          for (int64_t r = 0; r < rows; ++r) {
            for (int64_t i = 0; i < n; ++i) {
              const float product = a[q * a_stride + r] * x[r * stride + i];
              expected[q * n + i] = expected[q * n + i] + product;
            }
          }
        }
        kernels->axpy_rows(Bytes(x), stride * 4, rows, a.data(), a_stride, queries, n, acc.data());
        for (int64_t i = 0; i < queries * n; ++i) {
          SCOPED_TRACE(::testing::Message() << queries << " queries, n = " << n << ", element " << i);
          EXPECT_EQ(Bits(acc[i]), Bits(expected[i]));
        }
      }
    }
  }
}

TEST(FloatDotTest, DispatchedKernelsAreOneOfThese) {
  const std::vector<float> x = RandomRows(3, 65, 70, 1);
  const std::vector<float> y = RandomRows(2, 65, 65, 2);
  std::vector<float> dispatched(6), portable(6);
  FloatDotRows(Bytes(x), 70 * 4, 3, y.data(), 2, 65, 0.5f, dispatched.data(), 3);
  internal::PortableFloatDotKernels().dot_rows(Bytes(x), 70 * 4, 3, y.data(), 2, 65, 0.5f, portable.data(), 3);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(Bits(dispatched[i]), Bits(portable[i]));
}

}  // namespace
}  // namespace kvjit::cpu
