#include "runtime/cpu/KvCacheRows.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>

#include "runtime/cpu/CpuIsa.h"
#include "runtime/cpu/DotKernels.h"
#include "runtime/cpu/HalfDot.h"
#include "runtime/quant/Half.h"
#include "runtime/schema/KvCacheFormat.h"

#if defined(KVJIT_CPU_HAVE_AVX2_KERNELS)
#include <immintrin.h>
#endif

namespace kvjit::cpu {
namespace {

constexpr int64_t kBlock = kvx::kKvCacheBlockElements;
// The largest finite E4M3FN value.
constexpr float kE4m3Max = 448.0f;

float MaxMagnitude(const float* x) {
  float amax = 0.0f;
  for (int64_t i = 0; i < kBlock; ++i) amax = std::max(amax, std::fabs(x[i]));
  return amax;
}

void StoreScale(float d, uint8_t* out) {
  const uint16_t half = quant::FloatToHalf(d);
  std::memcpy(out, &half, sizeof(half));
}

float LoadScale(const uint8_t* in) {
  uint16_t half;
  std::memcpy(&half, in, sizeof(half));
  return quant::HalfToFloat(half);
}

// As ggml's AVX2 quantize_row_q8_0 (the activations' quantizer, whose scale
// is already rounded through f16).
void StoreQ8Block(const float* x, uint8_t* out) {
  static const CpuIsa isa = BestCpuIsa();
  internal::Q8Block32 block;
  internal::QuantizeQ8Blocks32(isa, x, 1, &block);
  StoreScale(block.scale, out);
  std::memcpy(out + 2, block.q, sizeof(block.q));
}

// As ggml's quantize_row_q4_0_ref: the scale is the element of largest
// magnitude over −8, so that element becomes nibble 0 and the rest round
// half up (+ 8.5, truncated) into 0..15.
void StoreQ4Block(const float* x, uint8_t* out) {
  float amax = 0.0f;
  float max = 0.0f;
  for (int64_t i = 0; i < kBlock; ++i) {
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      max = x[i];
    }
  }
  const float d = max / -8.0f;
  const float inverse = d != 0.0f ? 1.0f / d : 0.0f;
  StoreScale(d, out);
  auto nibble = [&](float v) {
    return static_cast<uint8_t>(std::min(15, static_cast<int>(static_cast<int8_t>(v * inverse + 8.5f))));
  };
  for (int64_t i = 0; i < kBlock / 2; ++i) {
    out[2 + i] = static_cast<uint8_t>(nibble(x[i]) | (nibble(x[i + kBlock / 2]) << 4));
  }
}

void StoreE4m3Block(const float* x, uint8_t* out) {
  const float amax = MaxMagnitude(x);
  StoreScale(amax / kE4m3Max, out);
  const float multiplier = amax != 0.0f ? kE4m3Max / amax : 0.0f;
  for (int64_t i = 0; i < kBlock; ++i) out[2 + i] = FloatToE4m3(x[i] * multiplier);
}

std::array<float, 256> MakeE4m3Table() {
  std::array<float, 256> table{};
  for (int code = 0; code < 256; ++code) {
    const int exponent = (code >> 3) & 0xF;
    const int mantissa = code & 0x7;
    float magnitude = exponent == 0 ? std::ldexp(static_cast<float>(mantissa), -9)
                                    : std::ldexp(1.0f + mantissa / 8.0f, exponent - 7);
    if ((code & 0x7F) == 0x7F) magnitude = std::nanf("");
    table[code] = (code & 0x80) ? -magnitude : magnitude;
  }
  return table;
}

// Every code's value, made once.
const std::array<float, 256>& E4m3Table() {
  static const std::array<float, 256> table = MakeE4m3Table();
  return table;
}

#if defined(KVJIT_CPU_HAVE_AVX2_KERNELS)
// Attention converts every cached key and value it reads, so the common
// types have AVX2 loads; each lane computes what the portable loop does
// (an exact conversion, then one f32 multiply), so the bits are the same.
__attribute__((target("avx2,f16c"))) bool Avx2LoadKvRow(kvx::StorageType type, const uint8_t* in, int64_t n,
                                                         float* out) {
  switch (type) {
    case kvx::StorageType::F16:
      if (n % 8 != 0) return false;
      for (int64_t i = 0; i < n; i += 8) {
        const __m128i halves = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + 2 * i));
        _mm256_storeu_ps(out + i, _mm256_cvtph_ps(halves));
      }
      return true;
    case kvx::StorageType::BF16:
      if (n % 8 != 0) return false;
      for (int64_t i = 0; i < n; i += 8) {
        const __m128i halves = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + 2 * i));
        const __m256i widened = _mm256_slli_epi32(_mm256_cvtepu16_epi32(halves), 16);
        _mm256_storeu_ps(out + i, _mm256_castsi256_ps(widened));
      }
      return true;
    case kvx::StorageType::Q8_0:
      for (int64_t b = 0; b < n / kBlock; ++b, in += 2 + kBlock, out += kBlock) {
        const __m256 d = _mm256_set1_ps(LoadScale(in));
        for (int64_t i = 0; i < kBlock; i += 8) {
          const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(in + 2 + i));
          const __m256 q = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(bytes));
          _mm256_storeu_ps(out + i, _mm256_mul_ps(d, q));
        }
      }
      return true;
    case kvx::StorageType::Q4_0:
      for (int64_t b = 0; b < n / kBlock; ++b, in += 2 + kBlock / 2, out += kBlock) {
        const __m256 d = _mm256_set1_ps(LoadScale(in));
        const __m256i eight = _mm256_set1_epi32(8);
        for (int64_t i = 0; i < kBlock / 2; i += 8) {
          const __m256i bytes = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(in + 2 + i)));
          const __m256i low = _mm256_sub_epi32(_mm256_and_si256(bytes, _mm256_set1_epi32(0xF)), eight);
          const __m256i high = _mm256_sub_epi32(_mm256_srli_epi32(bytes, 4), eight);
          _mm256_storeu_ps(out + i, _mm256_mul_ps(d, _mm256_cvtepi32_ps(low)));
          _mm256_storeu_ps(out + i + kBlock / 2, _mm256_mul_ps(d, _mm256_cvtepi32_ps(high)));
        }
      }
      return true;
    case kvx::StorageType::F8_E4M3: {
      // A normal code's exponent and mantissa move into an f32's, rebiased
      // (7 to 127); a subnormal's (exponent 0) is its mantissa times 2^-9.
      // Both are exact, as the table's values are.
      const __m256i rebias = _mm256_set1_epi32((127 - 7) << 23);
      const __m256i smallest_normal = _mm256_set1_epi32(8);
      const __m256 subnormal_step = _mm256_set1_ps(1.0f / 512.0f);
      for (int64_t b = 0; b < n / kBlock; ++b, in += 2 + kBlock, out += kBlock) {
        const __m256 d = _mm256_set1_ps(LoadScale(in));
        for (int64_t i = 0; i < kBlock; i += 8) {
          const __m256i codes = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(in + 2 + i)));
          const __m256i sign = _mm256_slli_epi32(_mm256_and_si256(codes, _mm256_set1_epi32(0x80)), 24);
          const __m256i magnitude = _mm256_and_si256(codes, _mm256_set1_epi32(0x7F));
          const __m256 normal = _mm256_castsi256_ps(_mm256_add_epi32(_mm256_slli_epi32(magnitude, 20), rebias));
          const __m256 subnormal = _mm256_mul_ps(_mm256_cvtepi32_ps(magnitude), subnormal_step);
          const __m256 is_subnormal = _mm256_castsi256_ps(_mm256_cmpgt_epi32(smallest_normal, magnitude));
          const __m256 value = _mm256_or_ps(_mm256_blendv_ps(normal, subnormal, is_subnormal), _mm256_castsi256_ps(sign));
          _mm256_storeu_ps(out + i, _mm256_mul_ps(d, value));
        }
      }
      return true;
    }
    default:
      return false;
  }
}
#endif

}  // namespace

float E4m3ToFloat(uint8_t code) { return E4m3Table()[code]; }

uint8_t FloatToE4m3(float x) {
  const uint32_t bits = quant::FloatBits(x);
  const uint8_t sign = static_cast<uint8_t>((bits >> 24) & 0x80);
  const float magnitude = std::fabs(x);
  if (!(magnitude < kE4m3Max)) return sign | 0x7E;  // saturates; NaN too (no NaN is ever stored)
  // Below the smallest normal (2^-6) the codes step by 2^-9.
  if (magnitude < 0.015625f) return sign | static_cast<uint8_t>(std::nearbyint(magnitude * 512.0f));
  // Keep 3 of the 23 mantissa bits, rounding to even; a carry moves into the
  // exponent, as it should.
  const uint32_t rounded = quant::ShiftRightRoundingToEven(bits & 0x7FFFFFFF, 20);
  const uint32_t code = rounded - ((127 - 7) << 3);
  return sign | static_cast<uint8_t>(std::min<uint32_t>(code, 0x7E));
}

void RotateHadamard(float* x, int64_t n, int64_t block) {
  const float scale = 1.0f / std::sqrt(static_cast<float>(block));
  for (float* b = x; b < x + n; b += block) {
    for (int64_t half = 1; half < block; half *= 2) {
      for (int64_t i = 0; i < block; i += 2 * half) {
        for (int64_t j = i; j < i + half; ++j) {
          const float a = b[j], c = b[j + half];
          b[j] = a + c;
          b[j + half] = a - c;
        }
      }
    }
    for (int64_t i = 0; i < block; ++i) b[i] *= scale;
  }
}

int64_t KvRowBytes(kvx::StorageType type, int64_t n) {
  const kvx::KvCacheFormat& format = *kvx::FindKvCacheFormat(type);
  return n / format.elements_per_block * format.bytes_per_block;
}

void StoreKvRow(kvx::StorageType type, const float* x, int64_t n, uint8_t* out) {
  switch (type) {
    case kvx::StorageType::F32:
      std::memcpy(out, x, static_cast<size_t>(n) * sizeof(float));
      return;
    case kvx::StorageType::F16:
      StoreHalfRow(x, out, n);
      return;
    case kvx::StorageType::BF16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t v = quant::FloatToBFloat16(x[i]);
        std::memcpy(out + 2 * i, &v, sizeof(v));
      }
      return;
    case kvx::StorageType::Q8_0:
      for (int64_t b = 0; b < n / kBlock; ++b) StoreQ8Block(x + b * kBlock, out + b * (2 + kBlock));
      return;
    case kvx::StorageType::Q4_0:
      for (int64_t b = 0; b < n / kBlock; ++b) StoreQ4Block(x + b * kBlock, out + b * (2 + kBlock / 2));
      return;
    case kvx::StorageType::F8_E4M3:
      for (int64_t b = 0; b < n / kBlock; ++b) StoreE4m3Block(x + b * kBlock, out + b * (2 + kBlock));
      return;
    default:
      // The executable's loader admits only KvCacheFormat.h's types.
      std::abort();
  }
}

void LoadKvRow(kvx::StorageType type, const uint8_t* in, int64_t n, float* out) {
#if defined(KVJIT_CPU_HAVE_AVX2_KERNELS)
  static const bool avx2 = CpuSupports(CpuIsa::kAvx2);
  if (avx2 && Avx2LoadKvRow(type, in, n, out)) return;
#endif
  PortableLoadKvRow(type, in, n, out);
}

void PortableLoadKvRow(kvx::StorageType type, const uint8_t* in, int64_t n, float* out) {
  switch (type) {
    case kvx::StorageType::F32:
      std::memcpy(out, in, static_cast<size_t>(n) * sizeof(float));
      return;
    case kvx::StorageType::F16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t v;
        std::memcpy(&v, in + 2 * i, sizeof(v));
        out[i] = quant::HalfToFloat(v);
      }
      return;
    case kvx::StorageType::BF16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t v;
        std::memcpy(&v, in + 2 * i, sizeof(v));
        out[i] = quant::BFloat16ToFloat(v);
      }
      return;
    case kvx::StorageType::Q8_0:
      for (int64_t b = 0; b < n / kBlock; ++b, in += 2 + kBlock, out += kBlock) {
        const float d = LoadScale(in);
        const auto* q = reinterpret_cast<const int8_t*>(in + 2);
        for (int64_t i = 0; i < kBlock; ++i) out[i] = d * static_cast<float>(q[i]);
      }
      return;
    case kvx::StorageType::Q4_0:
      for (int64_t b = 0; b < n / kBlock; ++b, in += 2 + kBlock / 2, out += kBlock) {
        const float d = LoadScale(in);
        for (int64_t i = 0; i < kBlock / 2; ++i) {
          out[i] = d * static_cast<float>((in[2 + i] & 0xF) - 8);
          out[i + kBlock / 2] = d * static_cast<float>((in[2 + i] >> 4) - 8);
        }
      }
      return;
    case kvx::StorageType::F8_E4M3:
      for (int64_t b = 0; b < n / kBlock; ++b, in += 2 + kBlock, out += kBlock) {
        const float d = LoadScale(in);
        for (int64_t i = 0; i < kBlock; ++i) out[i] = d * E4m3ToFloat(in[2 + i]);
      }
      return;
    default:
      std::abort();
  }
}

}  // namespace kvjit::cpu
