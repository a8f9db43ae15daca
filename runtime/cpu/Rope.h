#ifndef KVJIT_RUNTIME_CPU_ROPE_H_
#define KVJIT_RUNTIME_CPU_ROPE_H_

#include <cstdint>
#include <vector>

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
//
// With `angles`, the cosines and sines come from the ones a Rope call of the
// same step computed for the same positions and angle parameters, if any,
// and are kept there for the next: every layer rotates q and k at the same
// positions, 2 x layers calls per step.
class RopeAngles;
absl::Status Rope(const float* x, int64_t tokens, int64_t heads, int64_t head_dim, const int32_t* positions,
                  const RopeParams& params, float* out, ThreadPool& pool, RopeAngles* angles = nullptr);

// The cosines and sines of one step's Rope calls, one table per positions
// buffer and set of angle parameters (theta, rotary_dim, scaling, freq
// factors; Gemma 3's local and global layers have two). A table is keyed by
// the positions' address, not their values: the runner clears the tables
// before each step, whose positions may reuse the last step's buffer.
class RopeAngles {
 public:
  void Clear() { tables_.clear(); }

  // [tokens, rotary_dim / 2] each, pair i of token t at t * pairs + i.
  struct Table {
    const int32_t* positions;
    int64_t tokens;
    float theta;
    int64_t rotary_dim;
    RopeScaling scaling;
    std::vector<float> freq_factors;
    std::vector<float> cosines;
    std::vector<float> sines;
  };

  // The table of this step's `positions` under `params`, computed on its
  // first request.
  const Table& For(const int32_t* positions, int64_t tokens, const RopeParams& params, ThreadPool& pool);

 private:
  std::vector<Table> tables_;
};

namespace internal {
// One head's rotation over `pairs` pairs in `style`, with its token's cosines
// and sines (Rope.h's contraction), for tests: the portable form, and the
// AVX2 + FMA one (null where this build or CPU has none), the same bits.
using RotatePairs = void (*)(const float* in, const float* cosines, const float* sines, int64_t pairs,
                             RopeStyle style, float* out);
RotatePairs PortableRotatePairs();
RotatePairs Avx2RotatePairs();
}  // namespace internal

}  // namespace kvjit::cpu

#endif  // KVJIT_RUNTIME_CPU_ROPE_H_
