#ifndef KVJIT_RUNTIME_CPU_ROPE_H_
#define KVJIT_RUNTIME_CPU_ROPE_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "runtime/cpu/ThreadPool.h"

namespace kvjit::cpu {

enum class RopeStyle {
  kInterleaved,  // rotates pairs (2i, 2i + 1): GPT-J, llama.cpp's LLaMA GGUFs
  kNeox,         // rotates pairs (i, i + rotary_dim / 2): GPT-NeoX, Hugging Face LLaMA, Qwen
};

// Read from the executable's kvx.RopeScaling, whose schema defaults are the
// runtime's; the numbers are read only for a kind that uses them, so they
// have no defaults of their own here.
struct RopeScaling {
  enum class Kind {
    kNone,
    kLinear,  // positions divided by `factor` (ggml's freq_scale = 1 / factor)
    kLlama3,  // Llama 3.1's per-frequency divisors (ggml's rope_freqs tensor)
  };
  Kind kind = Kind::kNone;
  float factor{};
  float low_freq_factor{};           // kLlama3
  float high_freq_factor{};          // kLlama3
  int64_t original_max_positions{};  // kLlama3
};

struct RopeParams {
  RopeStyle style = RopeStyle::kNeox;
  float theta = 10000.0f;
  // The leading dimensions of each head that rotate (even, 2..head_dim); the
  // rest pass through unchanged.
  int64_t rotary_dim = 0;
  RopeScaling scaling;
  // Per-pair divisors of the angle (llama.cpp's rope_freqs tensor), rotary_dim
  // / 2 of them, in place of a llama3 `scaling`; empty: none.
  absl::Span<const float> freq_factors;
};

// Rotary position embedding of x [tokens, heads, head_dim] (token t at
// positions[t]) into out, which may be x itself.
//
// Precision: angles are computed exactly as llama.cpp's CPU backend does, in
// f32: theta_scale = powf(theta, -2 / rotary_dim); pair i's angle is
// freq_scale * ((p * theta_scale^i) / divisor_i) where the power is a running
// f32 product over i, then cosf / sinf. This is less accurate than a double
// computation (the running product's relative error grows ~i * 2^-24, so the
// angle's absolute error ~ p * i * 6e-8 radians), but equal to what llama.cpp
// computes, which matters more for matching its greedy outputs. Llama 3
// divisors are computed in double and rounded to f32 (GGUF files store them
// as an f32 tensor computed the same way). The rotation is, as ggml's build
// contracts it, out0 = fma(x0, cos, -(x1 * sin)) and
// out1 = fma(x0, sin, x1 * cos).
absl::Status Rope(const float* x, int64_t tokens, int64_t heads, int64_t head_dim, const int32_t* positions,
                  const RopeParams& params, float* out, ThreadPool& pool);

}  // namespace kvjit::cpu

#endif  // KVJIT_RUNTIME_CPU_ROPE_H_
