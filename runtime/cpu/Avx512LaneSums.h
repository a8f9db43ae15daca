#ifndef KVJIT_RUNTIME_CPU_AVX512LANESUMS_H_
#define KVJIT_RUNTIME_CPU_AVX512LANESUMS_H_
// Sums across the lanes of 512-bit registers that the AVX-512 GEMMs and
// single rows share. Included only by translation units compiled for
// AVX-512, in an anonymous namespace (DotKernels.h's linkage rule).

#if !defined(__AVX512F__)
#error "Avx512LaneSums.h is for translation units compiled with AVX-512"
#endif

#include <immintrin.h>

namespace kvjit::cpu::internal {
namespace {

// The sums of each 128-bit quarter's four int32 lanes of z0..z3: lane
// 4q + i is quarter q of z_i. Integer adds, exact in any order.
__attribute__((always_inline)) inline __m512i QuarterSums(__m512i z0, __m512i z1, __m512i z2, __m512i z3) {
  const __m512i pairs01 = _mm512_add_epi32(_mm512_unpacklo_epi32(z0, z1), _mm512_unpackhi_epi32(z0, z1));
  const __m512i pairs23 = _mm512_add_epi32(_mm512_unpacklo_epi32(z2, z3), _mm512_unpackhi_epi32(z2, z3));
  return _mm512_add_epi32(_mm512_unpacklo_epi64(pairs01, pairs23), _mm512_unpackhi_epi64(pairs01, pairs23));
}

// DotKernels.h's LaneSum on both 256-bit halves of v at once: lane 0 of the
// result is the low half's ((a0 + a4) + (a2 + a6)) + ((a1 + a5) + (a3 + a7)),
// lane 8 the high half's.
__attribute__((always_inline)) inline __m512 LaneSumOfEachHalf(__m512 v) {
  const __m512 quads = _mm512_add_ps(v, _mm512_shuffle_f32x4(v, v, _MM_SHUFFLE(2, 3, 0, 1)));
  const __m512 pairs = _mm512_add_ps(quads, _mm512_permute_ps(quads, _MM_SHUFFLE(1, 0, 3, 2)));
  return _mm512_add_ps(pairs, _mm512_permute_ps(pairs, _MM_SHUFFLE(2, 3, 0, 1)));
}

}  // namespace
}  // namespace kvjit::cpu::internal

#endif  // KVJIT_RUNTIME_CPU_AVX512LANESUMS_H_
