#include "ir/Reference/RefCacheRounding.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "runtime/quant/Half.h"

namespace kvjit::reference {
namespace {

constexpr int64_t kBlock = 32;

float ThroughHalf(float x) { return quant::HalfToFloat(quant::FloatToHalf(x)); }

float MaxMagnitude(const float* block) {
  float amax = 0.0f;
  for (int64_t i = 0; i < kBlock; ++i) amax = std::max(amax, std::fabs(block[i]));
  return amax;
}

// d = max|x| / 127 (stored as f16), q the nearest integer to x / d.
void RoundQ8Block(float* block) {
  const float amax = MaxMagnitude(block);
  const double d = amax / 127.0;
  const float stored_d = ThroughHalf(static_cast<float>(d));
  for (int64_t i = 0; i < kBlock; ++i) {
    const double q = d == 0.0 ? 0.0 : std::nearbyint(block[i] / d);
    block[i] = stored_d * static_cast<float>(q);
  }
}

// d = (the element of largest magnitude) / -8 (stored as f16), the nibble
// n = x / d + 8 rounded half up, at most 15; x = d (n - 8).
void RoundQ4Block(float* block) {
  float extreme = 0.0f;
  for (int64_t i = 0; i < kBlock; ++i) {
    if (std::fabs(block[i]) > std::fabs(extreme)) extreme = block[i];
  }
  const float d = extreme / -8.0f;
  const float stored_d = ThroughHalf(d);
  for (int64_t i = 0; i < kBlock; ++i) {
    const double n = d == 0.0f ? 8.0 : std::min(15.0, std::floor(block[i] / static_cast<double>(d) + 8.5));
    block[i] = stored_d * static_cast<float>(n - 8.0);
  }
}

// The E4M3FN values 0..448, by code 0..126.
double E4m3Magnitude(int code) {
  const int exponent = code >> 3;
  const int mantissa = code & 7;
  return exponent == 0 ? mantissa * std::ldexp(1.0, -9) : (8 + mantissa) * std::ldexp(1.0, exponent - 10);
}

// The nearest E4M3FN value to |x| <= 448 found by search; ties to the even code.
double NearestE4m3(double magnitude) {
  int best = 0;
  for (int code = 1; code <= 126; ++code) {
    const double distance = std::fabs(E4m3Magnitude(code) - magnitude);
    const double best_distance = std::fabs(E4m3Magnitude(best) - magnitude);
    if (distance < best_distance || (distance == best_distance && code % 2 == 0)) best = code;
  }
  return E4m3Magnitude(best);
}

// d = max|x| / 448 (stored as f16), each x / d as its nearest E4M3 value.
void RoundE4m3Block(float* block) {
  const float amax = MaxMagnitude(block);
  const double d = amax / 448.0;
  const float stored_d = ThroughHalf(static_cast<float>(d));
  for (int64_t i = 0; i < kBlock; ++i) {
    const double scaled = d == 0.0 ? 0.0 : std::min(448.0, std::fabs(block[i] / d));
    const float code_value = static_cast<float>(std::copysign(NearestE4m3(scaled), block[i]));
    block[i] = stored_d * code_value;
  }
}

}  // namespace

void RotateAsCacheStores(float* head_row, int64_t head_dim, int64_t block) {
  const double scale = 1.0 / std::sqrt(static_cast<double>(block));
  std::vector<double> rotated(static_cast<size_t>(block));
  for (int64_t b = 0; b < head_dim; b += block) {
    for (int64_t i = 0; i < block; ++i) {
      double sum = 0;
      for (int64_t j = 0; j < block; ++j) {
        sum += (__builtin_popcountll(static_cast<uint64_t>(i & j)) % 2 ? -1.0 : 1.0) * head_row[b + j];
      }
      rotated[i] = sum * scale;
    }
    for (int64_t i = 0; i < block; ++i) head_row[b + i] = static_cast<float>(rotated[i]);
  }
}

void RoundAsCacheStores(kv::CacheElement element, float* head_row, int64_t head_dim) {
  switch (element) {
    case kv::CacheElement::f32:
      return;
    case kv::CacheElement::f16:
      for (int64_t i = 0; i < head_dim; ++i) head_row[i] = ThroughHalf(head_row[i]);
      return;
    case kv::CacheElement::bf16:
      for (int64_t i = 0; i < head_dim; ++i) {
        head_row[i] = quant::BFloat16ToFloat(quant::FloatToBFloat16(head_row[i]));
      }
      return;
    case kv::CacheElement::q8_0:
      for (int64_t b = 0; b < head_dim; b += kBlock) RoundQ8Block(head_row + b);
      return;
    case kv::CacheElement::q4_0:
      for (int64_t b = 0; b < head_dim; b += kBlock) RoundQ4Block(head_row + b);
      return;
    case kv::CacheElement::f8_e4m3:
      for (int64_t b = 0; b < head_dim; b += kBlock) RoundE4m3Block(head_row + b);
      return;
  }
}

}  // namespace kvjit::reference
