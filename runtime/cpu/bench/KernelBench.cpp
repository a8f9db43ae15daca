// What the CPU kernels cost on SmolLM2-135M's shapes, in five sections:
//  - dispatch: one ParallelFor of an empty body per thread, the fixed cost
//    every kernel call pays to hand work to the pool and wait for it;
//  - read: a plain sum over 96 MiB (about a decode step's weights) through
//    the pool, the rate at which a step's weights can come in at all from
//    wherever they live between steps (on a large last-level cache, there);
//  - decode: a decode step's linears back to back as the step runs them (per
//    layer q/k/v fused, o, gate/up fused, down, in Q4_1; then the Q8_0 output
//    projection), for one token: ms per step and weight GB/s;
//  - shapes: each linear alone (Q4_1 layers, the Q8_0 output projection, the
//    FFN's up and down projections in f16, bf16 and f32, and its down
//    projection in Q4_K, Q5_K and Q6_K) for one token
//    (a decode GEMV), 16 (a batched decode of 16 sequences) and 128 (a
//    prefill GEMM): weight bytes streamed per second and multiply-adds (2
//    flops each) per second.
//  - activations: SiLU and GELU's tanh form over a 128-token prefill's FFN
//    (128 x 2048, Gemma 3 270M's width) and one decode token's: us/call
//    and elements per second.
//  - stream: a decode GEMV over weights far larger than the last-level cache
//    (copies of one matrix, 256 MB or more in all, read one after another as
//    a step's layers are), per storage type, at a 1B model's two shapes
//    (2048 -> 16384, a fused gate/up; 8192 -> 2048, a down projection), in
//    both layouts where the type has them, at 2 threads with the best ISA:
//    weight GB/s beside a plain read of the same bytes.
//  - kquant_gemm: the K-quant GEMMs in both CPU numerics (batch-invariant
//    and fast, CpuNumerics.h) at a 1B model's shapes, 16 and 128 tokens, 2
//    threads: GFLOP/s.
//  - f16_gemm: the same for f16 weights (the f32 FMA GEMM in either numerics).
//  - bf16_gemm: the same for bf16 weights (the fast numerics' vdpbf16ps
//    kernels where the CPU has AVX-512 BF16).
// Every ISA this CPU runs, at 1 and 2 threads; decode and shapes in both
// weight layouts (gguf: GGUF's rows; il8: kvx's RowsInterleaved8, repacked by
// runtime/schema/WeightLayout.h), the float types and the K-quants in GGUF's
// rows only. Weights come from the kernel tests' RandomWeights. Not a test:
// run by hand.
//
//   kvjit_cpu_kernel_bench [milliseconds per measurement, default 300] [dispatch|read|decode|shapes|activations|stream|kquant_gemm|f16_gemm|bf16_gemm]

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <initializer_list>
#include <cstring>
#include <functional>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "runtime/cpu/MatMul.h"
#include "runtime/cpu/RowKernels.h"
#include "runtime/schema/WeightLayout.h"
#include "tests/unit/runtime/cpu/RandomWeights.h"

namespace kvjit::cpu {
namespace {

struct Shape {
  quant::StorageType type;
  int64_t cols;  // inputs
  int64_t rows;  // outputs
  const char* role;
};

// The bench's two layouts: rows interleaved by 1 (GGUF's) and by 8.
constexpr int64_t kLayouts[] = {1, kvx::kInterleavedRows};
const char* LayoutName(int64_t rows_interleaved) { return rows_interleaved == 1 ? "gguf" : "il8"; }

// `gguf`'s bytes in the layout that interleaves `rows_interleaved` rows.
std::vector<uint8_t> InLayout(const Shape& shape, const std::vector<uint8_t>& gguf, int64_t rows_interleaved) {
  if (rows_interleaved == 1) return gguf;
  return kvx::InterleaveRows(gguf.data(), shape.rows, shape.cols / 32,
                             static_cast<uint64_t>(quant::BytesPerBlock(shape.type)));
}

// Calls `body` until `milliseconds` have passed (after three warm-up calls);
// returns seconds per call.
double SecondsPerCall(int milliseconds, const std::function<void()>& body) {
  for (int i = 0; i < 3; ++i) body();
  const auto start = std::chrono::steady_clock::now();
  const auto budget = std::chrono::milliseconds(milliseconds);
  int64_t calls = 0;
  std::chrono::duration<double> elapsed{0};
  while (elapsed < budget) {
    body();
    ++calls;
    elapsed = std::chrono::steady_clock::now() - start;
  }
  return elapsed.count() / static_cast<double>(calls);
}

// Seconds per plain read of `count` words through the pool: a sum the
// compiler cannot drop, the rate at which those bytes can come in at all.
double SecondsPerRead(int milliseconds, const uint64_t* words, int64_t count, ThreadPool& pool) {
  std::atomic<uint64_t> checksum{0};
  return SecondsPerCall(milliseconds, [&] {
    pool.ParallelFor(count, [&](int64_t begin, int64_t end) {
      uint64_t sums[4] = {};
      for (int64_t i = begin; i + 4 <= end; i += 4) {
        for (int k = 0; k < 4; ++k) sums[k] += words[i + k];
      }
      checksum.fetch_add(sums[0] + sums[1] + sums[2] + sums[3], std::memory_order_relaxed);
    });
  });
}

void RunDispatch(int milliseconds) {
  std::printf("%-10s %7s %10s\n", "section", "threads", "ns/call");
  for (int threads : {1, 2}) {
    ThreadPool pool(threads);
    std::atomic<int64_t> touched{0};
    const double seconds = SecondsPerCall(milliseconds, [&] {
      pool.ParallelFor(threads, [&](int64_t begin, int64_t end) {
        touched.fetch_add(end - begin, std::memory_order_relaxed);
      });
    });
    std::printf("%-10s %7d %10.1f\n", "dispatch", threads, seconds * 1e9);
  }
}

void RunRead(int milliseconds) {
  constexpr int64_t kWords = (int64_t{96} << 20) / sizeof(uint64_t);
  std::vector<uint64_t> words(kWords, 1);
  std::printf("%-10s %7s %10s %10s\n", "section", "threads", "ms/pass", "GB/s");
  for (int threads : {1, 2}) {
    ThreadPool pool(threads);
    const double seconds = SecondsPerRead(milliseconds, words.data(), kWords, pool);
    std::printf("%-10s %7d %10.3f %10.2f\n", "read", threads, seconds * 1e3,
                kWords * sizeof(uint64_t) / seconds / 1e9);
  }
}

void RunDecodeStep(int milliseconds) {
  constexpr int kLayers = 30;
  const Shape layer_shapes[] = {
      {quant::StorageType::kQ4_1, 576, 960, "attn_qkv"},
      {quant::StorageType::kQ4_1, 576, 576, "attn_output"},
      {quant::StorageType::kQ4_1, 576, 3072, "ffn_gate_up"},
      {quant::StorageType::kQ4_1, 1536, 576, "ffn_down"},
  };
  const Shape output_shape = {quant::StorageType::kQ8_0, 576, 49152, "output"};
  std::mt19937 rng(2024);
  // Each layer has weights of its own, as in the model: one copy would
  // stay in L2 and measure something no step sees.
  std::vector<std::vector<uint8_t>> weight_bytes[2];
  std::vector<WeightView> linears[2];
  std::vector<Shape> shapes;
  for (int layer = 0; layer < kLayers; ++layer) shapes.insert(shapes.end(), std::begin(layer_shapes), std::end(layer_shapes));
  shapes.push_back(output_shape);
  size_t step_bytes = 0;
  for (const Shape& shape : shapes) {
    const std::vector<uint8_t> gguf = testing::RandomWeights(shape.type, shape.rows, shape.cols, rng);
    for (int layout = 0; layout < 2; ++layout) weight_bytes[layout].push_back(InLayout(shape, gguf, kLayouts[layout]));
    step_bytes += gguf.size();
  }
  for (int layout = 0; layout < 2; ++layout) {
    for (size_t i = 0; i < shapes.size(); ++i) {
      linears[layout].push_back({shapes[i].type, shapes[i].rows, shapes[i].cols, weight_bytes[layout][i], kLayouts[layout]});
    }
  }
  std::vector<float> x(1536), y(49152);
  std::normal_distribution<float> normal;
  for (float& v : x) v = normal(rng);
  std::printf("%-10s %-10s %-6s %7s %10s %10s %10s\n", "section", "isa", "layout", "threads", "linears", "ms/step",
              "GB/s");
  for (CpuIsa isa : {CpuIsa::kPortable, CpuIsa::kAvx2, CpuIsa::kAvx512Vnni}) {
    if (!CpuSupports(isa)) continue;
    for (int threads : {1, 2}) {
      ThreadPool pool(threads);
      for (int layout = 0; layout < 2; ++layout) {
        const double seconds = SecondsPerCall(milliseconds, [&] {
          for (const WeightView& w : linears[layout]) MatMul(w, x.data(), 1, y.data(), pool, isa).IgnoreError();
        });
        std::printf("%-10s %-10s %-6s %7d %10zu %10.3f %10.2f\n", "decode", std::string(CpuIsaName(isa)).c_str(),
                    LayoutName(kLayouts[layout]), threads, linears[layout].size(), seconds * 1e3,
                    step_bytes / seconds / 1e9);
      }
    }
  }
}

void RunActivations(int milliseconds) {
  std::printf("%-12s %-10s %9s %7s %10s %14s\n", "section", "kernel", "elements", "threads", "us/call",
              "Melements/s");
  using Kernel = absl::Status (*)(const float*, float*, int64_t, ThreadPool&);
  const std::pair<const char*, Kernel> kernels[] = {
      {"silu", Silu}, {"gelu_tanh", GeluTanh}, {"tanh", Tanh}};
  for (int64_t elements : {int64_t{2048}, int64_t{128 * 2048}}) {
    std::vector<float> x(static_cast<size_t>(elements)), y(x.size());
    for (size_t i = 0; i < x.size(); ++i) x[i] = 4.0f * std::sin(0.001f * static_cast<float>(i));
    for (const auto& [name, kernel] : kernels) {
      for (int threads : {1, 2}) {
        ThreadPool pool(threads);
        const double seconds = SecondsPerCall(
            milliseconds, [&] { kernel(x.data(), y.data(), elements, pool).IgnoreError(); });
        std::printf("%-12s %-10s %9lld %7d %10.2f %14.1f\n", "activations", name,
                    static_cast<long long>(elements), threads, seconds * 1e6, elements / seconds / 1e6);
      }
    }
  }
}

void RunStream(int milliseconds) {
  constexpr size_t kMinStreamBytes = size_t{256} << 20;
  const quant::StorageType types[] = {quant::StorageType::kQ8_0, quant::StorageType::kQ4_0, quant::StorageType::kQ4_1,
                                      quant::StorageType::kQ4_K, quant::StorageType::kQ5_K, quant::StorageType::kQ6_K,
                                      quant::StorageType::kF16,  quant::StorageType::kBF16};
  const int64_t shapes[][2] = {{2048, 16384}, {8192, 2048}};  // cols (in), rows (out)
  std::mt19937 rng(2024);
  ThreadPool pool(2);
  std::printf("%-8s %-5s %-12s %-6s %7s %10s %10s\n", "section", "type", "in x out", "layout", "MB", "GEMV GB/s",
              "read GB/s");
  for (const quant::StorageType type : types) {
    for (const auto& [cols, rows] : shapes) {
      const Shape shape{type, cols, rows, "stream"};
      const std::vector<uint8_t> gguf = testing::RandomWeights(type, rows, cols, rng);
      const size_t copies = (kMinStreamBytes + gguf.size() - 1) / gguf.size();
      for (int64_t rows_interleaved : kLayouts) {
        if (rows_interleaved != 1 && quant::ElementsPerBlock(type) != 32) continue;
        const std::vector<uint8_t> one = InLayout(shape, gguf, rows_interleaved);
        std::vector<uint8_t> all(one.size() * copies);
        for (size_t c = 0; c < copies; ++c) std::copy(one.begin(), one.end(), all.begin() + c * one.size());
        std::vector<float> x(static_cast<size_t>(cols)), y(static_cast<size_t>(rows));
        std::normal_distribution<float> normal;
        for (float& v : x) v = normal(rng);
        const double gemv = SecondsPerCall(milliseconds, [&] {
          for (size_t c = 0; c < copies; ++c) {
            const WeightView w{type, rows, cols, absl::MakeConstSpan(all).subspan(c * one.size(), one.size()),
                               rows_interleaved};
            MatMul(w, x.data(), 1, y.data(), pool).IgnoreError();
          }
        });
        const double read = SecondsPerRead(milliseconds, reinterpret_cast<const uint64_t*>(all.data()),
                                           static_cast<int64_t>(all.size() / sizeof(uint64_t)), pool);
        char shape_text[32];
        std::snprintf(shape_text, sizeof shape_text, "%lldx%lld", static_cast<long long>(cols),
                      static_cast<long long>(rows));
        std::printf("%-8s %-5s %-12s %-6s %7.0f %10.2f %10.2f\n", "stream",
                    std::string(quant::StorageTypeName(type)).c_str(), shape_text, LayoutName(rows_interleaved),
                    all.size() / 1e6, all.size() / gemv / 1e9, all.size() / read / 1e9);
      }
    }
  }
}

// The products of `types` in both numerics (CpuNumerics.h) at a 1B model's
// shapes, 2 threads, AVX-512 VNNI: a decode GEMV, a batched decode of 16 and
// a 128-token prefill.
void RunNumericsGemm(int milliseconds, const char* section, std::initializer_list<quant::StorageType> types) {
  if (!CpuSupports(CpuIsa::kAvx512Vnni)) return;
  const int64_t shapes[][2] = {{2048, 2048}, {2048, 8192}, {8192, 2048}};  // cols (in), rows (out)
  std::mt19937 rng(2024);
  ThreadPool pool(2);
  std::printf("%-12s %-5s %-12s %6s %-16s %10s %10s\n", "section", "type", "in x out", "tokens", "numerics",
              "us/call", "GFLOP/s");
  for (const quant::StorageType type : types) {
    for (const auto& [cols, rows] : shapes) {
      const std::vector<uint8_t> bytes = testing::RandomWeights(type, rows, cols, rng);
      const WeightView weight{type, rows, cols, bytes};
      for (int64_t tokens : {1, 16, 128}) {
        std::vector<float> x(static_cast<size_t>(cols * tokens)), y(static_cast<size_t>(rows * tokens));
        std::normal_distribution<float> normal;
        for (float& v : x) v = normal(rng);
        for (CpuNumerics numerics : {CpuNumerics::kBatchInvariant, CpuNumerics::kFast}) {
          const double seconds = SecondsPerCall(milliseconds, [&] {
            MatMul(weight, x.data(), tokens, y.data(), pool, CpuIsa::kAvx512Vnni, numerics).IgnoreError();
          });
          char shape_text[32];
          std::snprintf(shape_text, sizeof shape_text, "%lldx%lld", static_cast<long long>(cols),
                        static_cast<long long>(rows));
          std::printf("%-12s %-5s %-12s %6lld %-16s %10.1f %10.2f\n", section,
                      std::string(quant::StorageTypeName(type)).c_str(), shape_text, static_cast<long long>(tokens),
                      std::string(CpuNumericsName(numerics)).c_str(), seconds * 1e6,
                      2.0 * rows * cols * tokens / seconds / 1e9);
        }
      }
    }
  }
}

int RunShapes(int milliseconds) {
  const Shape shapes[] = {
      {quant::StorageType::kQ4_1, 576, 576, "attn_q/o"},   {quant::StorageType::kQ4_1, 576, 1536, "ffn_up/gate"},
      {quant::StorageType::kQ4_1, 1536, 576, "ffn_down"},  {quant::StorageType::kQ8_0, 576, 1536, "ffn_up"},
      {quant::StorageType::kQ8_0, 576, 49152, "output"},
      {quant::StorageType::kF16, 576, 1536, "ffn_up"},     {quant::StorageType::kF16, 1536, 576, "ffn_down"},
      {quant::StorageType::kBF16, 576, 1536, "ffn_up"},    {quant::StorageType::kBF16, 1536, 576, "ffn_down"},
      {quant::StorageType::kF32, 576, 1536, "ffn_up"},     {quant::StorageType::kF32, 1536, 576, "ffn_down"},
      {quant::StorageType::kQ4_K, 1536, 576, "ffn_down"},  {quant::StorageType::kQ5_K, 1536, 576, "ffn_down"},
      {quant::StorageType::kQ6_K, 1536, 576, "ffn_down"},
  };
  std::mt19937 rng(2024);
  std::printf("%-12s %-5s %-13s %-6s %6s %-10s %7s %10s %10s %10s\n", "role", "type", "in x out", "layout",
              "tokens", "isa", "threads", "us/call", "GB/s", "GFLOP/s");
  for (const Shape& shape : shapes) {
    const std::vector<uint8_t> gguf = testing::RandomWeights(shape.type, shape.rows, shape.cols, rng);
    for (int64_t rows_interleaved : kLayouts) {
    if (rows_interleaved != 1 && quant::ElementsPerBlock(shape.type) != 32) continue;  // only 32-element blocks interleave
    const std::vector<uint8_t> bytes = InLayout(shape, gguf, rows_interleaved);
    const WeightView weight{shape.type, shape.rows, shape.cols, bytes, rows_interleaved};
    for (int64_t tokens : {1, 16, 128}) {
    std::vector<float> x(static_cast<size_t>(shape.cols * tokens)), y(static_cast<size_t>(shape.rows * tokens));
    std::normal_distribution<float> normal;
    for (float& v : x) v = normal(rng);
    for (CpuIsa isa : {CpuIsa::kPortable, CpuIsa::kAvx2, CpuIsa::kAvx512Vnni}) {
      if (!CpuSupports(isa) || (tokens > 1 && isa == CpuIsa::kPortable)) continue;
      for (int threads : {1, 2}) {
        ThreadPool pool(threads);
        if (absl::Status status = MatMul(weight, x.data(), tokens, y.data(), pool, isa); !status.ok()) {
          std::fprintf(stderr, "%s\n", status.ToString().c_str());
          return 1;
        }
        const double seconds = SecondsPerCall(
            milliseconds, [&] { MatMul(weight, x.data(), tokens, y.data(), pool, isa).IgnoreError(); });
        char shape_text[48];
        std::snprintf(shape_text, sizeof shape_text, "%lldx%lld", static_cast<long long>(shape.cols),
                      static_cast<long long>(shape.rows));
        std::printf("%-12s %-5s %-13s %-6s %6lld %-10s %7d %10.1f %10.2f %10.2f\n", shape.role,
                    std::string(quant::StorageTypeName(shape.type)).c_str(), shape_text,
                    LayoutName(rows_interleaved), static_cast<long long>(tokens), std::string(CpuIsaName(isa)).c_str(), threads,
                    seconds * 1e6, bytes.size() / seconds / 1e9,
                    2.0 * shape.rows * shape.cols * tokens / seconds / 1e9);
      }
    }
    }
    }
  }
  return 0;
}

}  // namespace
}  // namespace kvjit::cpu

int main(int argc, char** argv) {
  int milliseconds = argc > 1 ? std::atoi(argv[1]) : 300;
  if (milliseconds <= 0) milliseconds = 300;
  const char* section = argc > 2 ? argv[2] : "all";
  const bool all = std::strcmp(section, "all") == 0;
  if (!all && std::strcmp(section, "dispatch") != 0 && std::strcmp(section, "read") != 0 &&
      std::strcmp(section, "decode") != 0 && std::strcmp(section, "shapes") != 0 &&
      std::strcmp(section, "activations") != 0 && std::strcmp(section, "stream") != 0 &&
      std::strcmp(section, "kquant_gemm") != 0 && std::strcmp(section, "bf16_gemm") != 0 &&
      std::strcmp(section, "f16_gemm") != 0 &&
      std::strcmp(section, "block_gemm") != 0) {
    std::fprintf(stderr,
                 "kvjit_cpu_kernel_bench: section '%s' is none of dispatch, read, decode, shapes, "
                 "activations, stream, kquant_gemm, f16_gemm, bf16_gemm, block_gemm, all\n",
                 section);
    return 2;
  }
  if (all || std::strcmp(section, "dispatch") == 0) kvjit::cpu::RunDispatch(milliseconds);
  if (all || std::strcmp(section, "read") == 0) kvjit::cpu::RunRead(milliseconds);
  if (all || std::strcmp(section, "decode") == 0) kvjit::cpu::RunDecodeStep(milliseconds);
  if (all || std::strcmp(section, "activations") == 0) kvjit::cpu::RunActivations(milliseconds);
  if (all || std::strcmp(section, "stream") == 0) kvjit::cpu::RunStream(milliseconds);
  if (all || std::strcmp(section, "kquant_gemm") == 0) {
    kvjit::cpu::RunNumericsGemm(milliseconds, "kquant_gemm",
                                {kvjit::quant::StorageType::kQ4_K, kvjit::quant::StorageType::kQ5_K, kvjit::quant::StorageType::kQ6_K});
  }
  if (all || std::strcmp(section, "block_gemm") == 0) {
    kvjit::cpu::RunNumericsGemm(milliseconds, "block_gemm",
                                {kvjit::quant::StorageType::kQ8_0, kvjit::quant::StorageType::kQ4_0,
                                 kvjit::quant::StorageType::kQ5_0, kvjit::quant::StorageType::kQ4_1});
  }
  if (all || std::strcmp(section, "f16_gemm") == 0) {
    kvjit::cpu::RunNumericsGemm(milliseconds, "f16_gemm", {kvjit::quant::StorageType::kF16});
  }
  if (all || std::strcmp(section, "bf16_gemm") == 0) {
    kvjit::cpu::RunNumericsGemm(milliseconds, "bf16_gemm", {kvjit::quant::StorageType::kBF16});
  }
  if (all || std::strcmp(section, "shapes") == 0) return kvjit::cpu::RunShapes(milliseconds);
  return 0;
}
