#include "runtime/cpu/Rope.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/cpu/CpuIsa.h"

#if defined(KVJIT_CPU_HAVE_AVX2_KERNELS)
#include <immintrin.h>
#endif

namespace kvjit::cpu {
namespace {

// Llama 3.1's rule: high frequencies (wavelength under original / high_freq
// positions) stay, low ones (over original / low_freq) are divided by
// `factor`, and the band between blends the two.
std::vector<float> FrequencyDivisors(const RopeParams& params) {
  const int64_t pairs = params.rotary_dim / 2;
  if (!params.freq_factors.empty()) {
    return std::vector<float>(params.freq_factors.begin(), params.freq_factors.end());
  }
  std::vector<float> divisors(static_cast<size_t>(pairs), 1.0f);
  if (params.scaling.kind != RopeScaling::Kind::kLlama3) return divisors;
  const RopeScaling& s = params.scaling;
  const double original = static_cast<double>(s.original_max_positions);
  const double low_freq_wavelength = original / s.low_freq_factor;
  const double high_freq_wavelength = original / s.high_freq_factor;
  const double pi = std::acos(-1.0);
  for (int64_t i = 0; i < pairs; ++i) {
    const double frequency = std::pow(static_cast<double>(params.theta), -2.0 * i / params.rotary_dim);
    const double wavelength = 2.0 * pi / frequency;
    double divisor = 1.0;
    if (wavelength > low_freq_wavelength) {
      divisor = s.factor;
    } else if (wavelength >= high_freq_wavelength) {
      const double smooth = (original / wavelength - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
      divisor = 1.0 / ((1.0 - smooth) / s.factor + smooth);
    }
    divisors[static_cast<size_t>(i)] = static_cast<float>(divisor);
  }
  return divisors;
}

absl::Status CheckRope(const float* x, int64_t tokens, int64_t heads, int64_t head_dim, const int32_t* positions,
                       const RopeParams& params, const float* out) {
  if (tokens < 0 || heads < 0 || head_dim < 0) {
    return absl::InvalidArgumentError(absl::StrCat("Rope: negative shape [", tokens, ", ", heads, ", ", head_dim, "]"));
  }
  if (params.rotary_dim < 2 || params.rotary_dim % 2 != 0 || params.rotary_dim > head_dim) {
    return absl::InvalidArgumentError(absl::StrCat("Rope: rotary_dim ", params.rotary_dim,
                                                   " must be even and within 2..head_dim (", head_dim, ")"));
  }
  if (!(params.theta > 0.0f)) return absl::InvalidArgumentError(absl::StrCat("Rope: theta ", params.theta, " is not positive"));
  const RopeScaling& s = params.scaling;
  if (s.kind != RopeScaling::Kind::kNone && !(s.factor > 0.0f)) {
    return absl::InvalidArgumentError(absl::StrCat("Rope: scaling factor ", s.factor, " is not positive"));
  }
  if (s.kind == RopeScaling::Kind::kLlama3 &&
      (!(s.low_freq_factor > 0.0f) || !(s.high_freq_factor > s.low_freq_factor) || s.original_max_positions <= 0)) {
    return absl::InvalidArgumentError(absl::StrCat("Rope: llama3 scaling needs 0 < low_freq_factor (",
                                                   s.low_freq_factor, ") < high_freq_factor (", s.high_freq_factor,
                                                   ") and original_max_positions (", s.original_max_positions,
                                                   ") > 0"));
  }
  if (!params.freq_factors.empty()) {
    if (s.kind == RopeScaling::Kind::kLlama3) {
      return absl::InvalidArgumentError("Rope: freq_factors and llama3 scaling are exclusive");
    }
    if (static_cast<int64_t>(params.freq_factors.size()) != params.rotary_dim / 2) {
      return absl::InvalidArgumentError(absl::StrCat("Rope: ", params.freq_factors.size(),
                                                     " freq_factors for ", params.rotary_dim / 2, " pairs"));
    }
    for (float factor : params.freq_factors) {
      if (!(factor > 0.0f) || std::isinf(factor)) {
        return absl::InvalidArgumentError(absl::StrCat("Rope: freq_factor ", factor, " is not positive and finite"));
      }
    }
  }
  if (tokens > 0 && heads > 0 && (x == nullptr || out == nullptr || positions == nullptr)) {
    return absl::InvalidArgumentError(absl::StrCat("Rope: null pointer for [", tokens, ", ", heads, ", ", head_dim, "]"));
  }
  return absl::OkStatus();
}

// Pairs [first, pairs) of one head, one product rounded, the other fused:
// the contraction ggml's build makes of its rotation, so the rotated q and k
// (and with them the 8-bit quantized activations downstream) match
// llama.cpp's bits. It is no less accurate than rounding both products. Pair
// i's elements are i * stride and i * stride + offset.
void RotateEach(const float* in, const float* cosines, const float* sines, int64_t first, int64_t pairs,
                RopeStyle style, float* out) {
  const int64_t stride = style == RopeStyle::kNeox ? 1 : 2;
  const int64_t offset = style == RopeStyle::kNeox ? pairs : 1;
  for (int64_t i = first; i < pairs; ++i) {
    const float x0 = in[i * stride];
    const float x1 = in[i * stride + offset];
    out[i * stride] = std::fma(x0, cosines[i], -(x1 * sines[i]));
    out[i * stride + offset] = std::fma(x0, sines[i], x1 * cosines[i]);
  }
}

void PortableRotate(const float* in, const float* cosines, const float* sines, int64_t pairs, RopeStyle style,
                    float* out) {
  RotateEach(in, cosines, sines, 0, pairs, style, out);
}

#if defined(KVJIT_CPU_HAVE_AVX2_KERNELS)
// The same operations eight lanes at a time, with FMA in hardware (the
// portable build calls libm's fmaf per element), the pairs past the last
// full register one by one. NeoX pairs' halves are contiguous runs;
// interleaved pairs sit side by side in a register, whose lanes swapped
// within each pair give the other element: even lanes take x0 c - (x1 s),
// odd lanes x0 s + (x1 c), each from its own fused form.
__attribute__((target("avx2,fma"))) void Avx2Rotate(const float* in, const float* cosines, const float* sines,
                                                    int64_t pairs, RopeStyle style, float* out) {
  int64_t i = 0;
  if (style == RopeStyle::kNeox) {
    for (; i + 8 <= pairs; i += 8) {
      const __m256 x0 = _mm256_loadu_ps(in + i), x1 = _mm256_loadu_ps(in + pairs + i);
      const __m256 c = _mm256_loadu_ps(cosines + i), s = _mm256_loadu_ps(sines + i);
      const __m256 first = _mm256_fmsub_ps(x0, c, _mm256_mul_ps(x1, s));
      const __m256 second = _mm256_fmadd_ps(x0, s, _mm256_mul_ps(x1, c));
      _mm256_storeu_ps(out + i, first);
      _mm256_storeu_ps(out + pairs + i, second);
    }
    RotateEach(in, cosines, sines, i, pairs, style, out);
    return;
  }
  const __m256i duplicate = _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3);
  for (; i + 4 <= pairs; i += 4) {
    const __m256 v = _mm256_loadu_ps(in + 2 * i);            // x0, x1 of pairs i..i+3
    const __m256 swapped = _mm256_permute_ps(v, 0xB1);        // x1, x0
    const __m256 c = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(_mm_loadu_ps(cosines + i)), duplicate);
    const __m256 s = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(_mm_loadu_ps(sines + i)), duplicate);
    const __m256 even = _mm256_fmsub_ps(v, c, _mm256_mul_ps(swapped, s));   // x0 c - (x1 s)
    const __m256 odd = _mm256_fmadd_ps(swapped, s, _mm256_mul_ps(v, c));    // x0 s + (x1 c)
    _mm256_storeu_ps(out + 2 * i, _mm256_blend_ps(even, odd, 0xAA));
  }
  RotateEach(in, cosines, sines, i, pairs, style, out);
}
#endif

internal::RotatePairs RotatePairsKernel() {
  const internal::RotatePairs avx2 = internal::Avx2RotatePairs();
  return avx2 != nullptr ? avx2 : internal::PortableRotatePairs();
}

// The angles of `tokens` tokens at `positions`, as Rope.h states them, into
// table.cosines and table.sines.
void ComputeAngles(const int32_t* positions, int64_t tokens, const RopeParams& params, RopeAngles::Table& table,
                   ThreadPool& pool) {
  const int64_t pairs = params.rotary_dim / 2;
  const std::vector<float> divisors = FrequencyDivisors(params);
  const float theta_scale = std::pow(params.theta, -2.0f / static_cast<float>(params.rotary_dim));
  const float freq_scale = params.scaling.kind == RopeScaling::Kind::kLinear ? 1.0f / params.scaling.factor : 1.0f;
  table.cosines.resize(static_cast<size_t>(tokens * pairs));
  table.sines.resize(static_cast<size_t>(tokens * pairs));
  pool.ParallelFor(tokens, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      float power = static_cast<float>(positions[t]);
      for (int64_t i = 0; i < pairs; ++i) {
        const float angle = freq_scale * (power / divisors[i]);
        table.cosines[t * pairs + i] = std::cos(angle);
        table.sines[t * pairs + i] = std::sin(angle);
        power *= theta_scale;
      }
    }
  });
}

bool SameScaling(const RopeScaling& a, const RopeScaling& b) {
  return a.kind == b.kind && a.factor == b.factor && a.low_freq_factor == b.low_freq_factor &&
         a.high_freq_factor == b.high_freq_factor && a.original_max_positions == b.original_max_positions;
}

}  // namespace

const RopeAngles::Table& RopeAngles::For(const int32_t* positions, int64_t tokens, const RopeParams& params,
                                         ThreadPool& pool) {
  for (const Table& table : tables_) {
    if (table.positions == positions && table.tokens == tokens && table.theta == params.theta &&
        table.rotary_dim == params.rotary_dim && SameScaling(table.scaling, params.scaling) &&
        std::equal(table.freq_factors.begin(), table.freq_factors.end(), params.freq_factors.begin(),
                   params.freq_factors.end())) {
      return table;
    }
  }
  Table& table = tables_.emplace_back();
  table.positions = positions;
  table.tokens = tokens;
  table.theta = params.theta;
  table.rotary_dim = params.rotary_dim;
  table.scaling = params.scaling;
  table.freq_factors.assign(params.freq_factors.begin(), params.freq_factors.end());
  ComputeAngles(positions, tokens, params, table, pool);
  return table;
}

absl::Status Rope(const float* x, int64_t tokens, int64_t heads, int64_t head_dim, const int32_t* positions,
                  const RopeParams& params, float* out, ThreadPool& pool, RopeAngles* angles) {
  if (absl::Status status = CheckRope(x, tokens, heads, head_dim, positions, params, out); !status.ok()) return status;
  const int64_t pairs = params.rotary_dim / 2;
  RopeAngles::Table own;
  if (angles == nullptr) ComputeAngles(positions, tokens, params, own, pool);
  const RopeAngles::Table& table = angles != nullptr ? angles->For(positions, tokens, params, pool) : own;
  const internal::RotatePairs rotate = RotatePairsKernel();
  pool.ParallelFor(tokens, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const float* cosines = table.cosines.data() + t * pairs;
      const float* sines = table.sines.data() + t * pairs;
      for (int64_t h = 0; h < heads; ++h) {
        const float* in = x + (t * heads + h) * head_dim;
        float* rotated = out + (t * heads + h) * head_dim;
        rotate(in, cosines, sines, pairs, params.style, rotated);
        if (rotated != in) {
          for (int64_t i = params.rotary_dim; i < head_dim; ++i) rotated[i] = in[i];
        }
      }
    }
  });
  return absl::OkStatus();
}

namespace internal {
RotatePairs PortableRotatePairs() { return PortableRotate; }
RotatePairs Avx2RotatePairs() {
#if defined(KVJIT_CPU_HAVE_AVX2_KERNELS)
  if (CpuSupports(CpuIsa::kAvx2)) return Avx2Rotate;
#endif
  return nullptr;
}
}  // namespace internal

}  // namespace kvjit::cpu
