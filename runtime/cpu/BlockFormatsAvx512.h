#ifndef KVJIT_RUNTIME_CPU_BLOCKFORMATSAVX512_H_
#define KVJIT_RUNTIME_CPU_BLOCKFORMATSAVX512_H_
// The 32-element block types' weights as the AVX-512 VNNI kernels read them
// (BlockGemmAvx512Vnni.cpp, and the fast numerics' BlockSumsAvx512Vnni.cpp):
// vpdpbusd multiplies unsigned bytes by signed ones, so every format yields
// its 32 values + bias as unsigned bytes (Q8_0: 128, Q4_0: 8, Q5_0: 16, the
// offset formats: 0), and its f16 scale d (and m) where the block keeps them.
//
// Included only by translation units compiled for AVX-512 BW/VL, in an
// anonymous namespace (DotKernels.h's linkage rule).

#if !defined(__AVX512VL__) || !defined(__AVX512BW__)
#error "BlockFormatsAvx512.h is for translation units compiled with AVX-512 BW/VL"
#endif

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "runtime/cpu/Avx2Nibbles.h"
#include "runtime/cpu/SimdLoads.h"

namespace kvjit::cpu::internal {
namespace {

// 0x10 in byte i where bit i of the 32-bit little-endian word at p is set.
__m256i FifthBits(const uint8_t* p) {
  uint32_t bits;
  std::memcpy(&bits, p, sizeof bits);
  const __mmask32 set = static_cast<__mmask32>(bits);
  return _mm256_maskz_mov_epi8(set, _mm256_set1_epi8(0x10));
}

// Each format: its block size, where its f16 scale and (offset formats) m
// are, its bias, and its 32 values + bias as unsigned bytes.
struct Q8_0Format {
  static constexpr int64_t kBytes = 34;
  static constexpr bool kHasOffset = false;
  static constexpr int32_t kBias = 128;
  static __m256i Unsigned(const uint8_t* block) {
    return _mm256_xor_si256(Load256(block + 2), _mm256_set1_epi8(static_cast<char>(0x80)));
  }
};

struct Q4_0Format {
  static constexpr int64_t kBytes = 18;
  static constexpr bool kHasOffset = false;
  static constexpr int32_t kBias = 8;
  static __m256i Unsigned(const uint8_t* block) { return Nibbles(block + 2); }
};

struct Q4_1Format {
  static constexpr int64_t kBytes = 20;
  static constexpr bool kHasOffset = true;
  static constexpr int32_t kBias = 0;
  static __m256i Unsigned(const uint8_t* block) { return Nibbles(block + 4); }
};

struct Q5_0Format {
  static constexpr int64_t kBytes = 22;
  static constexpr bool kHasOffset = false;
  static constexpr int32_t kBias = 16;
  static __m256i Unsigned(const uint8_t* block) {
    return _mm256_or_si256(Nibbles(block + 6), FifthBits(block + 2));
  }
};

struct Q5_1Format {
  static constexpr int64_t kBytes = 24;
  static constexpr bool kHasOffset = true;
  static constexpr int32_t kBias = 0;
  static __m256i Unsigned(const uint8_t* block) {
    return _mm256_or_si256(Nibbles(block + 8), FifthBits(block + 4));
  }
};

}  // namespace
}  // namespace kvjit::cpu::internal

#endif  // KVJIT_RUNTIME_CPU_BLOCKFORMATSAVX512_H_
