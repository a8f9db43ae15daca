#ifndef KVJIT_RUNTIME_CPU_FASTEXP_H_
#define KVJIT_RUNTIME_CPU_FASTEXP_H_

// exp(x) in f32 by the algorithm of Arm's optimized-routines vector expf
// (github.com/ARM-software/optimized-routines, math/v_expf.c), the one ggml's
// CPU backend implements as ggml_v_expf and uses for SiLU and softmax. kvjit
// follows it rather than the C library's expf (the two differ by an ulp now
// and then) so that activations agree with llama.cpp bit for bit: on
// quantized models, where activations are re-quantized to 8 bits, one ulp in
// one activation can grow into a different greedy token.
//
// Every operation, FMAs included, is spelled out, so the scalar and the AVX2
// forms return the same bits for every input (infinities, NaN and results
// that overflow or become subnormal included).

#include <cstdint>

namespace kvjit::cpu {

float FastExp(float x);

// out[i] = FastExp(x[i]) for i < n, eight at a time on CPUs with AVX2 + FMA.
// `out` may alias `x`.
void FastExpRow(const float* x, float* out, int64_t n);

namespace internal {
// The portable form of FastExpRow, for tests to compare with the dispatched one.
void PortableFastExpRow(const float* x, float* out, int64_t n);
}  // namespace internal

}  // namespace kvjit::cpu

#endif  // KVJIT_RUNTIME_CPU_FASTEXP_H_
