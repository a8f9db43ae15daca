// Throughput of the matrix kernels on SmolLM2-135M's Q4_1 shapes, for one
// token (a decode GEMV) and 128 (a prefill GEMM): weight bytes streamed per
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
  int64_t rows;
  int64_t cols;
  const char* role;
};

// Q4_1 blocks with random nibbles and realistic f16 scales and offsets.
std::vector<uint8_t> RandomQ4_1(int64_t rows, int64_t cols, std::mt19937& rng) {
  std::vector<uint8_t> bytes(static_cast<size_t>(rows * cols / 32 * 20));
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> scale(0.001f, 0.02f);
  for (size_t block = 0; block < bytes.size(); block += 20) {
    const uint16_t d = quant::FloatToHalf(scale(rng));
    const uint16_t m = quant::FloatToHalf(-8.0f * scale(rng));
    bytes[block] = static_cast<uint8_t>(d);
    bytes[block + 1] = static_cast<uint8_t>(d >> 8);
    bytes[block + 2] = static_cast<uint8_t>(m);
    bytes[block + 3] = static_cast<uint8_t>(m >> 8);
    for (int i = 4; i < 20; ++i) bytes[block + i] = static_cast<uint8_t>(byte(rng));
  }
  return bytes;
}

int Run(int milliseconds) {
  const Shape shapes[] = {{576, 1536, "ffn_down"}, {1536, 576, "ffn_up/gate"}, {49152, 576, "output"}};
  std::mt19937 rng(2024);
  std::printf("%-12s %-13s %6s %-10s %7s %10s %10s %10s\n", "role", "shape", "tokens", "isa", "threads",
              "us/call", "GB/s", "GFLOP/s");
  for (const Shape& shape : shapes) {
    const std::vector<uint8_t> bytes = RandomQ4_1(shape.rows, shape.cols, rng);
    const WeightView weight{quant::StorageType::kQ4_1, shape.rows, shape.cols, bytes};
    for (int64_t tokens : {1, 128}) {
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
        std::snprintf(shape_text, sizeof shape_text, "%lldx%lld", static_cast<long long>(shape.rows),
                      static_cast<long long>(shape.cols));
        std::printf("%-12s %-13s %6lld %-10s %7d %10.1f %10.2f %10.2f\n", shape.role, shape_text,
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
