// The kernels' weight decoding (codegen/cuda/device/Dequant.cuh), compiled
// here for the host with CUDA's rounded intrinsics spelled as the IEEE
// operations they are, gives the CPU runtime's weights bit for bit, for
// every storage type. (NvrtcCompileTest compiles the same text for GPUs.)

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "absl/types/span.h"
#include "gtest/gtest.h"
#include "runtime/quant/Dequantize.h"
#include "runtime/quant/Half.h"
#include "runtime/quant/StorageType.h"

namespace kvjit::codegen::cuda {
namespace {
namespace device {

// What the device code expects from the prelude and from CUDA.
#include "tests/unit/codegen/cuda/HostDeviceIntrinsics.inc"

#include "codegen/cuda/device/Dequant.cuh"

#undef KVJIT_DEVICE

}  // namespace device

using GroupDecoder = void (*)(const uint8_t* row, int group, int cols, float* out);

struct Format {
  quant::StorageType type;
  GroupDecoder decode;
};

const Format kFormats[] = {
    {quant::StorageType::kF32, device::dequant_f32},
    {quant::StorageType::kF16, device::dequant_f16},
    {quant::StorageType::kBF16, device::dequant_bf16},
    {quant::StorageType::kQ8_0, device::dequant_q8_0},
    {quant::StorageType::kQ4_0, device::dequant_q4_0},
    {quant::StorageType::kQ4_1, device::dequant_q4_1},
    {quant::StorageType::kQ5_0, device::dequant_q5_0},
    {quant::StorageType::kQ5_1, device::dequant_q5_1},
    {quant::StorageType::kQ4_K, device::dequant_q4_k},
    {quant::StorageType::kQ5_K, device::dequant_q5_k},
    {quant::StorageType::kQ6_K, device::dequant_q6_k},
};

// Both runtimes decode `row` of `cols` elements; they must agree bit for
// bit. Not AllEqual (tests/unit/common/NumericCompare.h), which fails on any
// NaN or infinity: random scale bits make NaN and infinite weights on
// purpose. An infinity must match bit for bit like any value; a NaN only
// needs to be NaN on both sides, its payload being each decoder's own.
void ExpectSameWeights(const Format& format, const std::vector<uint8_t>& row, int cols) {
  std::vector<float> cpu(cols);
  ASSERT_TRUE(quant::DequantizeRow(format.type, row, absl::MakeSpan(cpu)).ok());
  const int groups = (cols + 31) / 32;
  std::vector<float> gpu(static_cast<size_t>(groups) * 32, -1.0f);
  for (int group = 0; group < groups; ++group) {
    format.decode(row.data(), group, cols, gpu.data() + 32 * group);
  }
  for (int i = 0; i < cols; ++i) {
    if (std::isnan(cpu[i]) && std::isnan(gpu[i])) continue;
    uint32_t cpu_bits, gpu_bits;
    std::memcpy(&cpu_bits, &cpu[i], 4);
    std::memcpy(&gpu_bits, &gpu[i], 4);
    ASSERT_EQ(cpu_bits, gpu_bits) << quant::StorageTypeName(format.type) << " element " << i
                                  << ": CPU " << cpu[i] << ", kernel " << gpu[i];
  }
  for (int i = cols; i < groups * 32; ++i) EXPECT_EQ(gpu[i], 0.0f) << "past the row, element " << i;
}

TEST(DequantDeviceCodeTest, EveryStorageTypeDecodesAsOnTheCpu) {
  std::mt19937 random(7);
  for (const Format& format : kFormats) {
    for (int trial = 0; trial < 20; ++trial) {
      const int cols = 512;
      std::vector<uint8_t> row(*quant::RowBytes(format.type, cols));
      for (uint8_t& byte : row) byte = static_cast<uint8_t>(random());
      ExpectSameWeights(format, row, cols);
    }
  }
}

TEST(DequantDeviceCodeTest, FloatRowsEndInAPartialGroup) {
  std::mt19937 random(11);
  for (const Format& format : {kFormats[0], kFormats[1], kFormats[2]}) {
    const int cols = 70;  // two groups and 6 elements
    std::vector<uint8_t> row(*quant::RowBytes(format.type, cols));
    for (uint8_t& byte : row) byte = static_cast<uint8_t>(random());
    ExpectSameWeights(format, row, cols);
  }
}

}  // namespace
}  // namespace kvjit::codegen::cuda
