// Throughput of the matrix kernels on SmolLM2-135M's shapes (Q4_1 layers,
// the Q8_0 output projection), for one token (a decode GEMV), 16 (a batched
// decode of 16 sequences) and 128 (a prefill GEMM): weight bytes streamed per
// second and multiply-adds (2 flops each) per second, for every ISA this CPU
// runs, at 1 and 2 threads. Not a test: run by hand.
//
//   kvjit_cpu_kernel_bench [milliseconds per measurement, default 300]

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "runtime/cpu/MatMul.h"
#include "runtime/quant/Half.h"

namespace kvjit::cpu {
namespace {

struct Shape {
  quant::StorageType type;
  int64_t cols;  // inputs
  int64_t rows;  // outputs
  const char* role;
};

void StoreHalf(uint8_t* p, float value) {
  const uint16_t bits = quant::FloatToHalf(value);
  p[0] = static_cast<uint8_t>(bits);
  p[1] = static_cast<uint8_t>(bits >> 8);
}

// Blocks with random values and realistic f16 scales (and Q4_1's offsets).
std::vector<uint8_t> RandomWeights(quant::StorageType type, int64_t rows, int64_t cols, std::mt19937& rng) {
  const bool q8 = type == quant::StorageType::kQ8_0;
  const size_t block_bytes = q8 ? 34 : 20;
  std::vector<uint8_t> bytes(static_cast<size_t>(rows * cols / 32) * block_bytes);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> scale(0.001f, 0.02f);
  for (size_t block = 0; block < bytes.size(); block += block_bytes) {
    StoreHalf(&bytes[block], scale(rng));
    if (!q8) StoreHalf(&bytes[block + 2], -8.0f * scale(rng));
    for (size_t i = q8 ? 2 : 4; i < block_bytes; ++i) bytes[block + i] = static_cast<uint8_t>(byte(rng));
  }
  return bytes;
}

int Run(int milliseconds) {
  const Shape shapes[] = {
      {quant::StorageType::kQ4_1, 576, 576, "attn_q/o"},   {quant::StorageType::kQ4_1, 576, 1536, "ffn_up/gate"},
      {quant::StorageType::kQ4_1, 1536, 576, "ffn_down"},  {quant::StorageType::kQ8_0, 576, 1536, "ffn_up"},
      {quant::StorageType::kQ8_0, 576, 49152, "output"},
  };
  std::mt19937 rng(2024);
  std::printf("%-12s %-5s %-13s %6s %-10s %7s %10s %10s %10s\n", "role", "type", "in x out", "tokens", "isa",
              "threads", "us/call", "GB/s", "GFLOP/s");
  for (const Shape& shape : shapes) {
    const std::vector<uint8_t> bytes = RandomWeights(shape.type, shape.rows, shape.cols, rng);
    const WeightView weight{shape.type, shape.rows, shape.cols, bytes};
    for (int64_t tokens : {1, 16, 128}) {
    std::vector<float> x(static_cast<size_t>(shape.cols * tokens)), y(static_cast<size_t>(shape.rows * tokens));
    std::normal_distribution<float> normal;
    for (float& v : x) v = normal(rng);
    for (CpuIsa isa : {CpuIsa::kPortable, CpuIsa::kAvx2, CpuIsa::kAvx512Vnni}) {
      if (!CpuSupports(isa) || (tokens > 1 && isa == CpuIsa::kPortable)) continue;
      for (int threads : {1, 2}) {
        ThreadPool pool(threads);
        for (int i = 0; i < 3; ++i) {
          if (absl::Status status = MatMul(weight, x.data(), tokens, y.data(), pool, isa); !status.ok()) {
            std::fprintf(stderr, "%s\n", status.ToString().c_str());
            return 1;
          }
        }
        const auto start = std::chrono::steady_clock::now();
        const auto budget = std::chrono::milliseconds(milliseconds);
        int64_t calls = 0;
        std::chrono::duration<double> elapsed{0};
        while (elapsed < budget) {
          MatMul(weight, x.data(), tokens, y.data(), pool, isa).IgnoreError();
          ++calls;
          elapsed = std::chrono::steady_clock::now() - start;
        }
        const double seconds = elapsed.count() / static_cast<double>(calls);
        char shape_text[48];
        std::snprintf(shape_text, sizeof shape_text, "%lldx%lld", static_cast<long long>(shape.cols),
                      static_cast<long long>(shape.rows));
        std::printf("%-12s %-5s %-13s %6lld %-10s %7d %10.1f %10.2f %10.2f\n", shape.role,
                    std::string(quant::StorageTypeName(shape.type)).c_str(), shape_text,
                    static_cast<long long>(tokens), std::string(CpuIsaName(isa)).c_str(), threads,
                    seconds * 1e6, bytes.size() / seconds / 1e9,
                    2.0 * shape.rows * shape.cols * tokens / seconds / 1e9);
      }
    }
    }
  }
  return 0;
}

}  // namespace
}  // namespace kvjit::cpu

int main(int argc, char** argv) {
  const int milliseconds = argc > 1 ? std::atoi(argv[1]) : 300;
  return kvjit::cpu::Run(milliseconds > 0 ? milliseconds : 300);
}
