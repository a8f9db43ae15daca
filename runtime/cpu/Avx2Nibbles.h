#ifndef KVJIT_RUNTIME_CPU_AVX2NIBBLES_H_
#define KVJIT_RUNTIME_CPU_AVX2NIBBLES_H_

// Included only by translation units compiled for AVX2 or above. Its
// function has internal linkage, so the copy an AVX-512 unit compiles can
// never be the one an AVX2 unit calls (an inline function with external
// linkage could be merged into one copy at link time).

#include <immintrin.h>

#include <cstdint>

namespace kvjit::cpu::internal {
namespace {

// Low nibbles of 16 bytes (elements 0..15) then their high nibbles (16..31).
// The bytes are broadcast to both halves by the load and the upper half is
// shifted by a per-lane count, which keeps the shuffle port free (the
// decode GEMVs are bound by it).
__m256i Nibbles(const uint8_t* qs) {
  const __m256i packed = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs)));
  const __m256i shifted = _mm256_srlv_epi32(packed, _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4));
  return _mm256_and_si256(shifted, _mm256_set1_epi8(0x0f));
}

}  // namespace
}  // namespace kvjit::cpu::internal

#endif  // KVJIT_RUNTIME_CPU_AVX2NIBBLES_H_
