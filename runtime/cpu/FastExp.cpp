#include "runtime/cpu/FastExp.h"

#include <cmath>

#include "runtime/cpu/CpuIsa.h"
#include "runtime/quant/Half.h"

#if defined(KVJIT_CPU_HAVE_AVX2_KERNELS)
#include <immintrin.h>
#endif

namespace kvjit::cpu {
namespace {

// exp(x) = 2^n * exp(r) with n = round(x / ln2) and r = x - n ln2, |r| <= ln2 / 2.
// Adding 1.5 * 2^23 rounds x / ln2 to an integer, left in z's low mantissa
// bits, from where a shift moves it into the exponent field of 2^n.
constexpr float kShift = 0x1.8p23f;
constexpr float kInverseLn2 = 0x1.715476p+0f;
// ln2 in two parts, so that n * ln2 is subtracted with about 40 bits.
constexpr float kLn2High = 0x1.62e4p-1f;
constexpr float kLn2Low = 0x1.7f7d1cp-20f;
// exp(r) - 1 ~ c4 r + r^2 (c3 + c2 r) + r^4 (c1 + c0 r): near 1, 1/2, 1/6, 1/24 and 1/120.
constexpr float kC0 = 0x1.0e4020p-7f;
constexpr float kC1 = 0x1.573e2ep-5f;
constexpr float kC2 = 0x1.555e66p-3f;
constexpr float kC3 = 0x1.fffdb6p-2f;
constexpr float kC4 = 0x1.ffffecp-1f;
constexpr uint32_t kOneBits = 0x3f800000u;  // 1.0f
// Beyond |n| = 126, 2^n is not a normal float: it is applied as s1 * s2 with
// s1 = 2^127 (n > 0) or 2^-125 (n <= 0); beyond |n| = 192 the result is
// s1 * s1, i.e. infinity or zero.
constexpr float kLargestDirectExponent = 126.0f;
constexpr float kSaturatingExponent = 192.0f;
constexpr uint32_t kSplitBias = 0x82000000u;
constexpr uint32_t kSplitScaleBits = 0x7f000000u;

#if defined(KVJIT_CPU_HAVE_AVX2_KERNELS)
// FastExp on eight lanes: the same operations lane by lane.
__attribute__((target("avx2,fma"))) __m256 FastExp8(__m256 x) {
  const __m256 shift = _mm256_set1_ps(kShift);
  const __m256 z = _mm256_fmadd_ps(x, _mm256_set1_ps(kInverseLn2), shift);
  const __m256 n = _mm256_sub_ps(z, shift);
  const __m256 r =
      _mm256_fnmadd_ps(n, _mm256_set1_ps(kLn2Low), _mm256_fnmadd_ps(n, _mm256_set1_ps(kLn2High), x));
  const __m256i exponent = _mm256_slli_epi32(_mm256_castps_si256(z), 23);
  const __m256 scale = _mm256_castsi256_ps(_mm256_add_epi32(exponent, _mm256_set1_epi32(kOneBits)));
  const __m256 r2 = _mm256_mul_ps(r, r);
  const __m256 high = _mm256_fmadd_ps(_mm256_set1_ps(kC0), r, _mm256_set1_ps(kC1));
  const __m256 low = _mm256_fmadd_ps(_mm256_set1_ps(kC2), r, _mm256_set1_ps(kC3));
  const __m256 poly = _mm256_fmadd_ps(_mm256_fmadd_ps(high, r2, low), r2, _mm256_mul_ps(_mm256_set1_ps(kC4), r));
  const __m256 direct = _mm256_fmadd_ps(poly, scale, scale);
  const __m256 abs_n = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), n);
  const __m256 split_lanes = _mm256_cmp_ps(abs_n, _mm256_set1_ps(kLargestDirectExponent), _CMP_GT_OQ);
  if (_mm256_movemask_ps(split_lanes) == 0) return direct;
  const __m256i bias = _mm256_and_si256(_mm256_castps_si256(_mm256_cmp_ps(n, _mm256_setzero_ps(), _CMP_LE_OQ)),
                                        _mm256_set1_epi32(static_cast<int>(kSplitBias)));
  const __m256 s1 = _mm256_castsi256_ps(_mm256_add_epi32(bias, _mm256_set1_epi32(kSplitScaleBits)));
  const __m256 s2 = _mm256_castsi256_ps(_mm256_sub_epi32(exponent, bias));
  const __m256 split = _mm256_mul_ps(_mm256_fmadd_ps(poly, s2, s2), s1);
  const __m256 saturating_lanes = _mm256_cmp_ps(abs_n, _mm256_set1_ps(kSaturatingExponent), _CMP_GT_OQ);
  return _mm256_blendv_ps(_mm256_blendv_ps(direct, split, split_lanes), _mm256_mul_ps(s1, s1), saturating_lanes);
}

__attribute__((target("avx2,fma"))) void Avx2FastExpRow(const float* x, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, FastExp8(_mm256_loadu_ps(x + i)));
  for (; i < n; ++i) out[i] = FastExp(x[i]);
}
#endif

}  // namespace

float FastExp(float x) {
  const float z = std::fma(x, kInverseLn2, kShift);
  const float n = z - kShift;
  const float r = std::fma(-n, kLn2Low, std::fma(-n, kLn2High, x));
  const uint32_t exponent = quant::FloatBits(z) << 23;
  const float scale = quant::FloatFromBits(exponent + kOneBits);
  const float r2 = r * r;
  const float poly = std::fma(std::fma(std::fma(kC0, r, kC1), r2, std::fma(kC2, r, kC3)), r2, kC4 * r);
  // Written so that NaN (no comparison holds) takes the direct path, as in FastExp8.
  if (!(std::fabs(n) > kLargestDirectExponent)) return std::fma(poly, scale, scale);
  const uint32_t bias = n <= 0.0f ? kSplitBias : 0u;
  const float s1 = quant::FloatFromBits(bias + kSplitScaleBits);
  const float s2 = quant::FloatFromBits(exponent - bias);
  if (std::fabs(n) > kSaturatingExponent) return s1 * s1;
  return std::fma(poly, s2, s2) * s1;
}

namespace internal {
void PortableFastExpRow(const float* x, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = FastExp(x[i]);
}
}  // namespace internal

void FastExpRow(const float* x, float* out, int64_t n) {
#if defined(KVJIT_CPU_HAVE_AVX2_KERNELS)
  if (CpuSupports(CpuIsa::kAvx2)) {
    Avx2FastExpRow(x, out, n);
    return;
  }
#endif
  internal::PortableFastExpRow(x, out, n);
}

}  // namespace kvjit::cpu
