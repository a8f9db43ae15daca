#include "runtime/cpu/Rope.h"

#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"

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

}  // namespace

absl::Status Rope(const float* x, int64_t tokens, int64_t heads, int64_t head_dim, const int32_t* positions,
                  const RopeParams& params, float* out, ThreadPool& pool) {
  if (absl::Status status = CheckRope(x, tokens, heads, head_dim, positions, params, out); !status.ok()) return status;
  const int64_t pairs = params.rotary_dim / 2;
  const std::vector<float> divisors = FrequencyDivisors(params);
  const float theta_scale = std::pow(params.theta, -2.0f / static_cast<float>(params.rotary_dim));
  const float freq_scale = params.scaling.kind == RopeScaling::Kind::kLinear ? 1.0f / params.scaling.factor : 1.0f;
  const int64_t second_offset = params.style == RopeStyle::kNeox ? pairs : 1;
  const int64_t pair_stride = params.style == RopeStyle::kNeox ? 1 : 2;

  pool.ParallelFor(tokens, [&](int64_t begin, int64_t end) {
    std::vector<float> cosines(static_cast<size_t>(pairs)), sines(static_cast<size_t>(pairs));
    for (int64_t t = begin; t < end; ++t) {
      float power = static_cast<float>(positions[t]);
      for (int64_t i = 0; i < pairs; ++i) {
        const float angle = freq_scale * (power / divisors[i]);
        cosines[i] = std::cos(angle);
        sines[i] = std::sin(angle);
        power *= theta_scale;
      }
      for (int64_t h = 0; h < heads; ++h) {
        const float* in = x + (t * heads + h) * head_dim;
        float* rotated = out + (t * heads + h) * head_dim;
        for (int64_t i = 0; i < pairs; ++i) {
          const int64_t first = i * pair_stride;
          const float x0 = in[first];
          const float x1 = in[first + second_offset];
          // One product rounded, the other fused: the contraction ggml's
          // build makes of its rotation, so the rotated q and k (and with them
          // the 8-bit quantized activations downstream) match llama.cpp's
          // bits. It is no less accurate than rounding both products.
          rotated[first] = std::fma(x0, cosines[i], -(x1 * sines[i]));
          rotated[first + second_offset] = std::fma(x0, sines[i], x1 * cosines[i]);
        }
        if (rotated != in) {
          for (int64_t i = params.rotary_dim; i < head_dim; ++i) rotated[i] = in[i];
        }
      }
    }
  });
  return absl::OkStatus();
}

}  // namespace kvjit::cpu
