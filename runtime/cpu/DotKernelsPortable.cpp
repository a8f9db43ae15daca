// The portable dot products: plain C++ following DotKernels.h's numeric
// contract lane by lane, so they give the AVX2 kernels' results exactly.

#include <cmath>
#include <cstring>

#include "runtime/cpu/DotKernels.h"
#include "runtime/quant/Half.h"

namespace kvjit::cpu::internal {
namespace {

using quant::BFloat16ToFloat;
using quant::HalfToFloat;

uint16_t LoadU16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }

uint32_t LoadU32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) | (static_cast<uint32_t>(p[2]) << 16) |
         (static_cast<uint32_t>(p[3]) << 24);
}

float LoadHalf(const uint8_t* p) { return HalfToFloat(LoadU16(p)); }

// Adds the 8 lane sums of one block's integer products into the accumulators.
void AccumulateLanes(float d, const int32_t lanes[8], float acc[8]) {
  for (int m = 0; m < 8; ++m) acc[m] = std::fma(d, static_cast<float>(lanes[m]), acc[m]);
}

// Lane m of 32 products: elements 4m..4m+3.
void LaneSums32(const int32_t weights[32], const int8_t activations[32], int32_t lanes[8]) {
  for (int m = 0; m < 8; ++m) {
    int32_t sum = 0;
    for (int k = 4 * m; k < 4 * m + 4; ++k) sum += weights[k] * activations[k];
    lanes[m] = sum;
  }
}

// ---- 32-element blocks: each format yields the block's integer values in
// element order, its scale and (for Q4_1 / Q5_1) its offset m.

// The 32 nibbles of 16 bytes: low nibbles are elements 0..15, high 16..31.
void Nibbles(const uint8_t* qs, int32_t values[32]) {
  for (int i = 0; i < 16; ++i) {
    values[i] = qs[i] & 0x0f;
    values[i + 16] = qs[i] >> 4;
  }
}

void AddFifthBits(uint32_t qh, int32_t values[32]) {
  for (int i = 0; i < 32; ++i) values[i] |= static_cast<int32_t>((qh >> i) & 1) << 4;
}

struct Q8_0Format {
  static constexpr int64_t kBytes = 34;
  static constexpr bool kHasOffset = false;
  static float Offset(const uint8_t*) { return 0.0f; }
  static void Values(const uint8_t* block, int32_t values[32]) {
    for (int i = 0; i < 32; ++i) values[i] = static_cast<int8_t>(block[2 + i]);
  }
};

struct Q4_0Format {
  static constexpr int64_t kBytes = 18;
  static constexpr bool kHasOffset = false;
  static float Offset(const uint8_t*) { return 0.0f; }
  static void Values(const uint8_t* block, int32_t values[32]) {
    Nibbles(block + 2, values);
    for (int i = 0; i < 32; ++i) values[i] -= 8;
  }
};

struct Q4_1Format {
  static constexpr int64_t kBytes = 20;
  static constexpr bool kHasOffset = true;
  static float Offset(const uint8_t* block) { return LoadHalf(block + 2); }
  static void Values(const uint8_t* block, int32_t values[32]) { Nibbles(block + 4, values); }
};

struct Q5_0Format {
  static constexpr int64_t kBytes = 22;
  static constexpr bool kHasOffset = false;
  static float Offset(const uint8_t*) { return 0.0f; }
  static void Values(const uint8_t* block, int32_t values[32]) {
    Nibbles(block + 6, values);
    AddFifthBits(LoadU32(block + 2), values);
    for (int i = 0; i < 32; ++i) values[i] -= 16;
  }
};

struct Q5_1Format {
  static constexpr int64_t kBytes = 24;
  static constexpr bool kHasOffset = true;
  static float Offset(const uint8_t* block) { return LoadHalf(block + 2); }
  static void Values(const uint8_t* block, int32_t values[32]) {
    Nibbles(block + 8, values);
    AddFifthBits(LoadU32(block + 4), values);
  }
};

// Row-major blocks (kRowsInterleaved 1) or the interleaved layout's (8):
// the next block of a row lies kRowsInterleaved blocks further on.
template <class Format, int64_t kRowsInterleaved = 1>
float DotBlocks32(const uint8_t* weight_row, const void* activation_row, int64_t cols) {
  const auto* activations = static_cast<const Q8Block32*>(activation_row);
  float acc[8] = {};
  float offset = 0.0f;
  for (int64_t b = 0; b < cols / 32; ++b) {
    const uint8_t* block = weight_row + b * kRowsInterleaved * Format::kBytes;
    const Q8Block32& a = activations[b];
    int32_t values[32];
    int32_t lanes[8];
    Format::Values(block, values);
    LaneSums32(values, a.q, lanes);
    AccumulateLanes(LoadHalf(block) * a.scale, lanes, acc);
    if (Format::kHasOffset) offset = std::fma(Format::Offset(block), a.scaled_sum, offset);
  }
  return LaneSum(acc) + offset;
}

// ---- K-quants: 256-element super-blocks against Q8_K activations.

// Q4_K: f16 d, f16 dmin, 12 bytes of scales/mins, 128 bytes of nibbles; each
// 64 elements take 32 bytes, low nibbles first (sub-block 2g), then high
// nibbles (2g + 1). Value = d * scale * q - dmin * min.
// Q5_K: Q4_K with 32 bytes of fifth bits before the nibbles: bit 2g of qh[l]
// tops element 64g + l, bit 2g + 1 element 64g + 32 + l.
template <int64_t kBlockBytes, bool kHasFifthBits>
float DotScaledMinK(const uint8_t* weight_row, const void* activation_row, int64_t cols) {
  const auto* activations = static_cast<const Q8KBlock*>(activation_row);
  float acc[8] = {};
  float offset = 0.0f;
  for (int64_t b = 0; b < cols / 256; ++b) {
    const uint8_t* block = weight_row + b * kBlockBytes;
    const Q8KBlock& a = activations[b];
    int32_t scales[8], mins[8];
    UnpackKScalesAndMins(block + 4, scales, mins);
    const uint8_t* qh = block + 16;
    const uint8_t* qs = block + (kHasFifthBits ? 48 : 16);
    int32_t lanes[8] = {};
    for (int g = 0; g < 4; ++g) {
      int32_t low[32], high[32], partial[8];
      for (int l = 0; l < 32; ++l) {
        low[l] = qs[32 * g + l] & 0x0f;
        high[l] = qs[32 * g + l] >> 4;
        if (kHasFifthBits) {
          low[l] |= ((qh[l] >> (2 * g)) & 1) << 4;
          high[l] |= ((qh[l] >> (2 * g + 1)) & 1) << 4;
        }
      }
      LaneSums32(low, a.q + 64 * g, partial);
      for (int m = 0; m < 8; ++m) lanes[m] += scales[2 * g] * partial[m];
      LaneSums32(high, a.q + 64 * g + 32, partial);
      for (int m = 0; m < 8; ++m) lanes[m] += scales[2 * g + 1] * partial[m];
    }
    int32_t min_sum = 0;
    for (int j = 0; j < 8; ++j) min_sum += mins[j] * a.sums32[j];
    AccumulateLanes(LoadHalf(block) * a.scale, lanes, acc);
    offset = std::fma(-(LoadHalf(block + 2) * a.scale), static_cast<float>(min_sum), offset);
  }
  return LaneSum(acc) + offset;
}

// Q6_K: ql[128], qh[64], int8 scales[16] (one per 16 elements), f16 d.
// Element 128h + 32k + l takes its low 4 bits from ql[64h + 32(k & 1) + l]
// (low nibble for k < 2, high otherwise) and its top 2 bits from bits 2k,
// 2k + 1 of qh[32h + l]; value = d * scale * (q - 32).
float DotQ6_K(const uint8_t* weight_row, const void* activation_row, int64_t cols) {
  const auto* activations = static_cast<const Q8KBlock*>(activation_row);
  float acc[8] = {};
  for (int64_t b = 0; b < cols / 256; ++b) {
    const uint8_t* block = weight_row + b * 210;
    const Q8KBlock& a = activations[b];
    const uint8_t* ql = block;
    const uint8_t* qh = block + 128;
    const auto* scales = reinterpret_cast<const int8_t*>(block + 192);
    int32_t lanes[8] = {};
    for (int h = 0; h < 2; ++h) {
      for (int k = 0; k < 4; ++k) {
        int32_t values[32], partial[8];
        for (int l = 0; l < 32; ++l) {
          const uint8_t low_byte = ql[64 * h + 32 * (k & 1) + l];
          const int32_t low = k < 2 ? (low_byte & 0x0f) : (low_byte >> 4);
          const int32_t top = (qh[32 * h + l] >> (2 * k)) & 3;
          values[l] = (low | (top << 4)) - 32;
        }
        LaneSums32(values, a.q + 128 * h + 32 * k, partial);
        const int32_t first_scale = scales[8 * h + 2 * k];
        const int32_t second_scale = scales[8 * h + 2 * k + 1];
        for (int m = 0; m < 8; ++m) lanes[m] += (m < 4 ? first_scale : second_scale) * partial[m];
      }
    }
    AccumulateLanes(LoadHalf(block + 208) * a.scale, lanes, acc);
  }
  return LaneSum(acc);
}

// ---- Float weights.

float LoadF32Element(const uint8_t* row, int64_t i) {
  float value;
  std::memcpy(&value, row + 4 * i, sizeof value);
  return value;
}
float LoadF16Element(const uint8_t* row, int64_t i) { return LoadHalf(row + 2 * i); }
float LoadBF16Element(const uint8_t* row, int64_t i) { return BFloat16ToFloat(LoadU16(row + 2 * i)); }

template <float (*LoadElement)(const uint8_t*, int64_t)>
float DotFloat(const uint8_t* weight_row, const void* activation_row, int64_t cols) {
  const auto* x = static_cast<const float*>(activation_row);
  float acc[4][8] = {};
  const int64_t vector_cols = cols / 32 * 32;
  for (int64_t c = 0; c < vector_cols; c += 32) {
    for (int j = 0; j < 4; ++j) {
      for (int l = 0; l < 8; ++l) {
        const int64_t i = c + 8 * j + l;
        acc[j][l] = std::fma(LoadElement(weight_row, i), x[i], acc[j][l]);
      }
    }
  }
  float lanes[8];
  for (int l = 0; l < 8; ++l) lanes[l] = (acc[0][l] + acc[1][l]) + (acc[2][l] + acc[3][l]);
  double sum = LaneSum(lanes);
  for (int64_t i = vector_cols; i < cols; ++i) sum += static_cast<double>(LoadElement(weight_row, i) * x[i]);
  return static_cast<float>(sum);
}

}  // namespace

const DotKernels& PortableDotKernels() {
  static constexpr DotKernels kKernels = {
      DotFloat<LoadF32Element>,
      DotFloat<LoadF16Element>,
      DotFloat<LoadBF16Element>,
      DotBlocks32<Q8_0Format>,
      DotBlocks32<Q4_0Format>,
      DotBlocks32<Q4_1Format>,
      DotBlocks32<Q5_0Format>,
      DotBlocks32<Q5_1Format>,
      DotScaledMinK<144, false>,
      DotScaledMinK<176, true>,
      DotQ6_K,
  };
  return kKernels;
}

const BlockDotKernels& PortableInterleaved8DotKernels() {
  static constexpr BlockDotKernels kKernels = {
      DotBlocks32<Q8_0Format, 8>, DotBlocks32<Q4_0Format, 8>, DotBlocks32<Q4_1Format, 8>,
      DotBlocks32<Q5_0Format, 8>, DotBlocks32<Q5_1Format, 8>,
  };
  return kKernels;
}

}  // namespace kvjit::cpu::internal
