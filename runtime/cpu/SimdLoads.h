#ifndef KVJIT_RUNTIME_CPU_SIMDLOADS_H_
#define KVJIT_RUNTIME_CPU_SIMDLOADS_H_
// Unaligned loads the vector kernels of quantized blocks share: 32 bytes as
// an integer vector, and a block's f16 scale as a float by F16C.
//
// Included only by translation units compiled for AVX2 + F16C or later, in
// an anonymous namespace (DotKernels.h's linkage rule).

#if !defined(__AVX2__) || !defined(__F16C__)
#error "SimdLoads.h is for translation units compiled with AVX2 and F16C"
#endif

#include <immintrin.h>

#include <cstdint>
#include <cstring>

namespace kvjit::cpu::internal {
namespace {

[[maybe_unused]] __m256i Load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

[[maybe_unused]] float LoadHalf(const uint8_t* p) {
  uint16_t bits;
  std::memcpy(&bits, p, sizeof bits);
  return _cvtsh_ss(bits);
}

}  // namespace
}  // namespace kvjit::cpu::internal

#endif  // KVJIT_RUNTIME_CPU_SIMDLOADS_H_
