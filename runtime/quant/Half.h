#ifndef KVJIT_RUNTIME_QUANT_HALF_H_
#define KVJIT_RUNTIME_QUANT_HALF_H_

#include <cstdint>
#include <cstring>

namespace kvjit::quant {

// IEEE binary16 and bfloat16 travel as their bit patterns (uint16_t): neither
// has a portable C++17 type.

inline uint32_t FloatBits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

inline float FloatFromBits(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

// Exact: every binary16 value, subnormals included, is a binary32 value.
inline float HalfToFloat(uint16_t half) {
  const uint32_t sign = static_cast<uint32_t>(half & 0x8000) << 16;
  const uint32_t exponent = (half >> 10) & 0x1f;
  const uint32_t mantissa = half & 0x3ff;
  if (exponent == 0) {
    // Zero or subnormal: mantissa * 2^-24, exact in binary32.
    const float magnitude = static_cast<float>(mantissa) * FloatFromBits(0x33800000);  // 2^-24
    return FloatFromBits(sign | FloatBits(magnitude));
  }
  if (exponent == 0x1f) return FloatFromBits(sign | 0x7f800000 | (mantissa << 13));
  return FloatFromBits(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

// Shifts `value` right by `shift` bits, rounding to nearest, ties to even.
inline uint32_t ShiftRightRoundingToEven(uint32_t value, uint32_t shift) {
  const uint32_t kept = value >> shift;
  const uint32_t dropped = value & ((1u << shift) - 1);
  const uint32_t halfway = 1u << (shift - 1);
  return kept + ((dropped > halfway || (dropped == halfway && (kept & 1))) ? 1 : 0);
}

// Rounds to nearest, ties to even; overflows to infinity; NaNs stay NaN (quiet).
inline uint16_t FloatToHalf(float value) {
  const uint32_t bits = FloatBits(value);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000);
  const uint32_t magnitude = bits & 0x7fffffff;
  if (magnitude > 0x7f800000) {
    return static_cast<uint16_t>(sign | 0x7e00 | ((magnitude >> 13) & 0x3ff));
  }
  // 65520 = 0x477ff000 lies halfway between 65504, the largest half, and 2^16;
  // the tie goes to the even neighbour, which is infinity.
  if (magnitude >= 0x477ff000) return static_cast<uint16_t>(sign | 0x7c00);
  const uint32_t exponent = magnitude >> 23;
  if (exponent < 113) {
    // Below 2^-14, the result is a half subnormal: the value in units of
    // 2^-24 is significand * 2^(exponent - 126). Under 2^-25 it rounds to zero.
    if (exponent < 102) return sign;
    const uint32_t significand = (magnitude & 0x7fffff) | 0x800000;
    return static_cast<uint16_t>(sign | ShiftRightRoundingToEven(significand, 126 - exponent));
  }
  // A carry out of the mantissa correctly bumps the exponent.
  const uint32_t rebased = magnitude - (112u << 23);
  return static_cast<uint16_t>(sign | ShiftRightRoundingToEven(rebased, 13));
}

inline float BFloat16ToFloat(uint16_t bf16) { return FloatFromBits(static_cast<uint32_t>(bf16) << 16); }

// Rounds to nearest, ties to even; NaNs stay NaN (quiet).
inline uint16_t FloatToBFloat16(float value) {
  const uint32_t bits = FloatBits(value);
  if ((bits & 0x7fffffff) > 0x7f800000) return static_cast<uint16_t>((bits >> 16) | 0x40);
  return static_cast<uint16_t>(ShiftRightRoundingToEven(bits, 16));
}

}  // namespace kvjit::quant

#endif  // KVJIT_RUNTIME_QUANT_HALF_H_
