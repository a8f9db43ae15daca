// The kernels' KV cache conversions (codegen/cuda/device/KvCache.cuh),
// compiled here for the host with CUDA's rounded intrinsics spelled as the
// IEEE operations they are, against runtime/cpu/KvCacheRows.cpp bit for bit:
// bf16 and E4M3 encodings over edge cases and random bits, every E4M3 code's
// value, the blocked types' loads, and the Walsh-Hadamard rotation (one
// thread, so __syncthreads is nothing). The 32-lane block stores need warp
// shuffles; CudaKernelEmulationTest checks their bytes under the emulation.
// (NvrtcCompileTest compiles the same text for GPUs.)

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/cpu/KvCacheRows.h"
#include "runtime/quant/Half.h"

namespace kvjit::codegen::cuda {
namespace {
namespace device {

// What the device code expects from the prelude and from CUDA.
#include "tests/unit/codegen/cuda/HostDeviceIntrinsics.inc"
// One thread of a one-thread block: no warp to shuffle with.
struct Index {
  unsigned x = 0;
};
inline constexpr Index threadIdx{0};
inline constexpr Index blockDim{1};
inline void __syncthreads() {}
inline float __shfl_xor_sync(unsigned, float value, int) {
  ADD_FAILURE() << "a shuffle in a one-thread test";
  return value;
}

#include "codegen/cuda/device/Dequant.cuh"
#include "codegen/cuda/device/KvCache.cuh"

#undef KVJIT_DEVICE

}  // namespace device

float FromBits(uint32_t bits) {
  float x;
  std::memcpy(&x, &bits, 4);
  return x;
}

uint32_t Bits(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  return bits;
}

// Edge cases, then random bits and random values of E4M3's range.
std::vector<float> TestValues() {
  std::vector<float> values = {0.0f, -0.0f, 1.0f, -1.0f, 448.0f, -448.0f, 464.0f, 480.0f, 1e30f,
                               std::numeric_limits<float>::infinity(),
                               -std::numeric_limits<float>::infinity(), std::nanf(""),
                               0.015625f, 0.0156249990f, 0.001953125f, 0.0009765625f, 0.0029296875f,
                               FromBits(0x3f808000u), FromBits(0x3f818000u), FromBits(0x3f80ffffu),
                               FromBits(0x00000001u), FromBits(0x007fffffu), 65504.0f, 65520.0f};
  // E4M3's ties: halfway between neighbouring codes, across the whole range.
  for (int code = 0; code < 0x7e; ++code) {
    const float low = cpu::E4m3ToFloat(static_cast<uint8_t>(code));
    const float high = cpu::E4m3ToFloat(static_cast<uint8_t>(code + 1));
    values.push_back(0.5f * (low + high));
    values.push_back(-0.5f * (low + high));
  }
  std::mt19937 random(3);
  for (int i = 0; i < 200000; ++i) values.push_back(FromBits(static_cast<uint32_t>(random())));
  std::uniform_real_distribution<float> range(-460.0f, 460.0f);
  std::uniform_real_distribution<float> small(-0.02f, 0.02f);
  for (int i = 0; i < 200000; ++i) values.push_back(i % 2 ? range(random) : small(random));
  return values;
}

TEST(KvCacheDeviceCodeTest, Bf16IsTheCpus) {
  for (float x : TestValues()) {
    ASSERT_EQ(device::float_to_bf16(x), quant::FloatToBFloat16(x)) << "bits " << std::hex << Bits(x);
  }
}

TEST(KvCacheDeviceCodeTest, E4m3CodesAreTheCpus) {
  for (float x : TestValues()) {
    ASSERT_EQ(device::float_to_e4m3(x), cpu::FloatToE4m3(x)) << x << " (bits " << std::hex << Bits(x) << ")";
  }
}

TEST(KvCacheDeviceCodeTest, EveryE4m3CodesValueIsTheCpus) {
  for (int code = 0; code < 256; ++code) {
    const float cpu = cpu::E4m3ToFloat(static_cast<uint8_t>(code));
    const float kernel = device::e4m3_to_float(static_cast<uint32_t>(code));
    if (std::isnan(cpu)) {
      EXPECT_TRUE(std::isnan(kernel)) << "code " << code;
    } else {
      EXPECT_EQ(Bits(kernel), Bits(cpu)) << "code " << code;
    }
  }
}

// Random blocks (moderate f16 scales) read element by element as
// PortableLoadKvRow reads them.
TEST(KvCacheDeviceCodeTest, BlockedLoadsAreTheCpus) {
  std::mt19937 random(9);
  std::uniform_real_distribution<float> scale(0.001f, 0.05f);
  struct Type {
    kvx::StorageType type;
    int block_bytes;
    float (*load)(const uint8_t*, int);
  };
  for (const Type& t : {Type{kvx::StorageType::Q8_0, 34, device::load_kv_q8_0},
                        Type{kvx::StorageType::Q4_0, 18, device::load_kv_q4_0},
                        Type{kvx::StorageType::F8_E4M3, 34, device::load_kv_f8_e4m3}}) {
    constexpr int kElements = 128;
    std::vector<uint8_t> row(kElements / 32 * t.block_bytes);
    for (uint8_t& byte : row) byte = static_cast<uint8_t>(random());
    for (int b = 0; b < kElements / 32; ++b) {
      const uint16_t d = quant::FloatToHalf(scale(random));
      std::memcpy(row.data() + b * t.block_bytes, &d, 2);
    }
    std::vector<float> cpu(kElements);
    cpu::PortableLoadKvRow(t.type, row.data(), kElements, cpu.data());
    for (int d = 0; d < kElements; ++d) {
      const float kernel = t.load(row.data(), d);
      if (std::isnan(cpu[d]) && std::isnan(kernel)) continue;
      ASSERT_EQ(Bits(kernel), Bits(cpu[d])) << kvx::EnumNameStorageType(t.type) << " element " << d;
    }
  }
}

TEST(KvCacheDeviceCodeTest, RotationIsTheCpus) {
  std::mt19937 random(13);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int block : {2, 64, 128, 256}) {
    std::vector<float> x(512);
    for (float& v : x) v = normal(random);
    std::vector<float> expected = x;
    cpu::RotateHadamard(expected.data(), static_cast<int64_t>(expected.size()), block);
    device::hadamard_shared(x.data(), static_cast<int>(x.size()), block,
                            1.0f / std::sqrt(static_cast<float>(block)));
    for (size_t i = 0; i < x.size(); ++i) {
      ASSERT_EQ(Bits(x[i]), Bits(expected[i])) << "block " << block << ", element " << i;
    }
  }
}

}  // namespace
}  // namespace kvjit::codegen::cuda
