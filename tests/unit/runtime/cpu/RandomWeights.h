#ifndef KVJIT_TESTS_UNIT_RUNTIME_CPU_RANDOMWEIGHTS_H_
#define KVJIT_TESTS_UNIT_RUNTIME_CPU_RANDOMWEIGHTS_H_

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "runtime/quant/Half.h"
#include "runtime/quant/StorageType.h"

namespace kvjit::cpu::testing {

inline void StoreU16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v);
  p[1] = static_cast<uint8_t>(v >> 8);
}

// A weight matrix in `type`'s layout: quantized blocks get uniformly random
// packed values (every code, 6-bit scale and sign appears) with f16 factors
// of realistic size, so dequantized weights are O(0.1) like a model's.
inline std::vector<uint8_t> RandomWeights(quant::StorageType type, int64_t rows, int64_t cols, std::mt19937& rng) {
  using quant::StorageType;
  const int64_t block_elements = quant::ElementsPerBlock(type);
  const int64_t block_bytes = quant::BytesPerBlock(type);
  const int64_t blocks = rows * cols / block_elements;
  std::vector<uint8_t> bytes(static_cast<size_t>(blocks * block_bytes));
  std::normal_distribution<float> normal(0.0f, 0.1f);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> magnitude(0.5f, 1.5f);
  std::bernoulli_distribution negative(0.5);
  const auto half = [&](float scale) { return quant::FloatToHalf(scale * magnitude(rng)); };
  for (int64_t b = 0; b < blocks; ++b) {
    uint8_t* block = bytes.data() + b * block_bytes;
    switch (type) {
      case StorageType::kF32: {
        const float v = normal(rng);
        std::memcpy(block, &v, sizeof v);
        continue;
      }
      case StorageType::kF16: StoreU16(block, quant::FloatToHalf(normal(rng))); continue;
      case StorageType::kBF16: StoreU16(block, quant::FloatToBFloat16(normal(rng))); continue;
      default: break;
    }
    for (int64_t i = 0; i < block_bytes; ++i) block[i] = static_cast<uint8_t>(byte(rng));
    const float sign = negative(rng) ? -1.0f : 1.0f;
    switch (type) {
      case StorageType::kQ8_0: StoreU16(block, half(sign * 0.1f / 127)); break;
      case StorageType::kQ4_0: StoreU16(block, half(sign * 0.1f / 8)); break;
      case StorageType::kQ5_0: StoreU16(block, half(sign * 0.1f / 16)); break;
      case StorageType::kQ4_1:
      case StorageType::kQ5_1: {
        const float levels = type == StorageType::kQ4_1 ? 15.0f : 31.0f;
        StoreU16(block, half(0.2f / levels));
        StoreU16(block + 2, half(-0.1f));
        break;
      }
      case StorageType::kQ4_K:
      case StorageType::kQ5_K: {
        const float levels = type == StorageType::kQ4_K ? 15.0f : 31.0f;
        StoreU16(block, half(0.2f / levels / 32));  // sub-block scales are ~32 of 63
        StoreU16(block + 2, half(0.1f / 32));
        break;
      }
      case StorageType::kQ6_K: StoreU16(block + 208, half(0.1f / 32 / 64)); break;
      default: break;
    }
  }
  return bytes;
}

// `tokens` rows of `cols` activations that take the 8-bit quantizations to
// their edges, by token: +-4 throughout (every element at the block's
// scale), Gaussian with an outlier every 97 elements, and zeros in the first
// 300 then Gaussian (blocks whose scale is 0).
inline std::vector<float> EdgeActivations(int64_t tokens, int64_t cols, std::mt19937& rng) {
  std::vector<float> x(static_cast<size_t>(tokens * cols));
  std::normal_distribution<float> normal;
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t i = 0; i < cols; ++i) {
      float& v = x[t * cols + i];
      if (t % 3 == 0) v = i % 3 == 0 ? -4.0f : 4.0f;
      if (t % 3 == 1) v = i % 97 == 0 ? 20.0f * normal(rng) : normal(rng);
      if (t % 3 == 2) v = i < 300 ? 0.0f : normal(rng);
    }
  }
  return x;
}

}  // namespace kvjit::cpu::testing

#endif  // KVJIT_TESTS_UNIT_RUNTIME_CPU_RANDOMWEIGHTS_H_
