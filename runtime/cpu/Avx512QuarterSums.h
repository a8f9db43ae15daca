#ifndef KVJIT_RUNTIME_CPU_AVX512QUARTERSUMS_H_
#define KVJIT_RUNTIME_CPU_AVX512QUARTERSUMS_H_
// The transposing adds the fast numerics' K-quant kernels bring sub-block
// lanes together with (KQuantDotAvx512Vnni.cpp's single rows,
// KQuantGemmSubBlockSumsAvx512Vnni.cpp's GEMM). Included only by translation
// units compiled for AVX-512 BW/VL/VNNI, in an anonymous namespace
// (DotKernels.h's linkage rule).

#if !defined(__AVX512F__)
#error "Avx512QuarterSums.h is for translation units compiled with AVX-512"
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

}  // namespace
}  // namespace kvjit::cpu::internal

#endif  // KVJIT_RUNTIME_CPU_AVX512QUARTERSUMS_H_
