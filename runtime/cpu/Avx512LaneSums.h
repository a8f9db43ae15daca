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

// The float sums of four weight rows against one token group (four tokens)
// in a GEMM whose (row, token) pairs keep eight lanes each: ggml's lanes
// (KQuantGemmAvx512Vnni.cpp) or one lane per block of eight
// (BlockGemmBlockSumsAvx512Vnni.cpp); kept between the runs of blocks a
// micro-kernel takes them through.
struct MicroSums {
  __m512 acc[4][2];  // row r, tokens 2 * pair and 2 * pair + 1 in the halves
  __m512 offsets;    // row r, token t in lane 4r + t

  static MicroSums Zero() {
    MicroSums sums;
    for (int r = 0; r < 4; ++r) sums.acc[r][0] = sums.acc[r][1] = _mm512_setzero_ps();
    sums.offsets = _mm512_setzero_ps();
    return sums;
  }

  // results[r][t] once every block is in: each (row, token)'s lanes folded
  // as DotKernels.h's LaneSum folds, plus its offset where there is one.
  template <bool kHasOffsets>
  void Fold(float results[4][4]) const {
    alignas(64) float offset_of[16];
    _mm512_store_ps(offset_of, offsets);
    for (int r = 0; r < 4; ++r) {
      for (int pair = 0; pair < 2; ++pair) {
        alignas(64) float folded[16];
        _mm512_store_ps(folded, LaneSumOfEachHalf(acc[r][pair]));
        for (int i = 0; i < 2; ++i) {
          const float sum = folded[8 * i];
          results[r][2 * pair + i] = kHasOffsets ? sum + offset_of[4 * r + 2 * pair + i] : sum;
        }
      }
    }
  }
};

}  // namespace
}  // namespace kvjit::cpu::internal

#endif  // KVJIT_RUNTIME_CPU_AVX512LANESUMS_H_
