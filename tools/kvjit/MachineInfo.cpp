#include "tools/kvjit/MachineInfo.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <thread>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "runtime/cpu/CpuIsa.h"
#include "runtime/cpu/CpuNumerics.h"

namespace kvjit::cli {
namespace {

// The SIMD extensions that decide which kernels run, as /proc/cpuinfo spells them.
constexpr const char* kIsaFlags[] = {"sse4_2",   "avx",         "f16c",        "fma",
                                     "avx2",     "avx_vnni",    "avx512f",     "avx512bw",
                                     "avx512vl", "avx512_vnni", "avx512_bf16", "amx_int8"};

std::string CpuInfoField(const std::string& cpuinfo, absl::string_view field) {
  for (absl::string_view line : absl::StrSplit(cpuinfo, '\n')) {
    if (!absl::StartsWith(line, field)) continue;
    const size_t colon = line.find(':');
    if (colon == absl::string_view::npos) continue;
    return std::string(absl::StripAsciiWhitespace(line.substr(colon + 1)));
  }
  return "";
}

// 32-byte lanes, so that the loop issues vector loads on any x86-64.
typedef uint64_t Lanes __attribute__((vector_size(32)));

uint64_t SumSlice(const Lanes* begin, const Lanes* end) {
  Lanes a = {0, 0, 0, 0}, b = a, c = a, d = a;
  for (const Lanes* p = begin; p + 4 <= end; p += 4) {
    a += p[0];
    b += p[1];
    c += p[2];
    d += p[3];
  }
  const Lanes sum = a + b + c + d;
  return sum[0] + sum[1] + sum[2] + sum[3];
}

double MeasureReadBandwidth(int threads) {
  constexpr size_t kBytes = size_t{512} << 20;  // far above any last-level cache
  constexpr size_t kLanes = kBytes / sizeof(Lanes);
  std::unique_ptr<Lanes[]> data(new Lanes[kLanes]);
  std::memset(data.get(), 1, kBytes);  // fault every page in before timing
  std::vector<double> seconds;
  uint64_t checksum = 0;
  for (int pass = 0; pass < 5; ++pass) {
    std::vector<std::thread> workers;
    std::vector<uint64_t> sums(threads);
    const auto start = std::chrono::steady_clock::now();
    for (int t = 0; t < threads; ++t) {
      workers.emplace_back([&, t] {
        sums[t] = SumSlice(data.get() + kLanes * t / threads, data.get() + kLanes * (t + 1) / threads);
      });
    }
    for (std::thread& worker : workers) worker.join();
    seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    for (uint64_t sum : sums) checksum += sum;
  }
  // A use of the sums, so that the loads stay.
  asm volatile("" : : "r"(checksum));
  std::sort(seconds.begin(), seconds.end());
  return kBytes / seconds[seconds.size() / 2] / 1e9;
}

// Twelve chains: enough to cover an FMA's latency (4 cycles) on two ports.
constexpr int kChains = 12;

#if defined(__x86_64__)
__attribute__((target("avx512f"))) float FmaChainsAvx512(int64_t iterations) {
  __m512 acc[kChains];
  for (int k = 0; k < kChains; ++k) acc[k] = _mm512_set1_ps(0.001f * k);
  const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
  for (int64_t i = 0; i < iterations; ++i) {
    for (int k = 0; k < kChains; ++k) acc[k] = _mm512_fmadd_ps(acc[k], a, b);
  }
  for (int k = 1; k < kChains; ++k) acc[0] = _mm512_add_ps(acc[0], acc[k]);
  return _mm512_reduce_add_ps(acc[0]);
}

__attribute__((target("avx2,fma"))) float FmaChainsAvx2(int64_t iterations) {
  __m256 acc[kChains];
  for (int k = 0; k < kChains; ++k) acc[k] = _mm256_set1_ps(0.001f * k);
  const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
  for (int64_t i = 0; i < iterations; ++i) {
    for (int k = 0; k < kChains; ++k) acc[k] = _mm256_fmadd_ps(acc[k], a, b);
  }
  for (int k = 1; k < kChains; ++k) acc[0] = _mm256_add_ps(acc[0], acc[k]);
  float lanes[8];
  _mm256_storeu_ps(lanes, acc[0]);
  return lanes[0] + lanes[7];
}
#endif

float MultiplyAddChainsScalar(int64_t iterations) {
  float acc[kChains];
  for (int k = 0; k < kChains; ++k) acc[k] = 0.001f * k;
  for (int64_t i = 0; i < iterations; ++i) {
    for (int k = 0; k < kChains; ++k) acc[k] = acc[k] * 0.999999f + 1e-7f;
  }
  float sum = 0;
  for (float value : acc) sum += value;
  return sum;
}

std::string GitDescribe() {
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(
      popen("git describe --always --dirty --abbrev=12 2>/dev/null", "r"), pclose);
  if (pipe == nullptr) return "unknown";
  char line[128] = {};
  if (std::fgets(line, sizeof(line), pipe.get()) == nullptr) return "unknown";
  return std::string(absl::StripAsciiWhitespace(line));
}

}  // namespace

MachineInfo DescribeMachine(int threads) {
  MachineInfo machine;
  std::ifstream file("/proc/cpuinfo");
  std::stringstream cpuinfo;
  cpuinfo << file.rdbuf();
  machine.cpu_model = CpuInfoField(cpuinfo.str(), "model name");
  const std::vector<std::string> flags =
      absl::StrSplit(CpuInfoField(cpuinfo.str(), "flags"), ' ', absl::SkipEmpty());
  for (const char* isa : kIsaFlags) {
    if (std::find(flags.begin(), flags.end(), isa) != flags.end()) machine.isa_flags.push_back(isa);
  }
  machine.logical_cores = static_cast<int>(std::thread::hardware_concurrency());
  machine.bandwidth_threads = std::max(threads, 1);
  machine.read_bandwidth_gb_s = MeasureReadBandwidth(machine.bandwidth_threads);
  machine.kvjit_commit = GitDescribe();
  return machine;
}

PeakCompute MeasurePeakCompute(int threads) {
  threads = std::max(threads, 1);
  float (*chains)(int64_t) = MultiplyAddChainsScalar;
  int lanes = 1;
  std::string isa = "scalar multiply-add";
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx512f")) {
    chains = FmaChainsAvx512;
    lanes = 16;
    isa = "AVX-512 FMA";
  } else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    chains = FmaChainsAvx2;
    lanes = 8;
    isa = "AVX2 FMA";
  }
#endif
  constexpr int64_t kIterations = 20'000'000;
  std::vector<double> seconds;
  float checksum = 0;
  for (int pass = 0; pass < 3; ++pass) {
    std::vector<std::thread> workers;
    std::vector<float> sums(threads);
    const auto start = std::chrono::steady_clock::now();
    for (int t = 0; t < threads; ++t) {
      workers.emplace_back([&, t] { sums[t] = chains(kIterations); });
    }
    for (std::thread& worker : workers) worker.join();
    seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    for (float sum : sums) checksum += sum;
  }
  asm volatile("" : : "x"(checksum));
  std::sort(seconds.begin(), seconds.end());
  const double flops = 2.0 * kChains * lanes * kIterations * threads;
  PeakCompute peak;
  peak.gflop_s = flops / seconds[seconds.size() / 2] / 1e9;
  peak.source = absl::StrCat("f32 ", isa, ", ", threads, " threads x ", kChains,
                             " independent chains, measured");
  return peak;
}

nlohmann::json MachineInfoToJson(const MachineInfo& machine) {
  return {{"cpu_model", machine.cpu_model},
          {"isa_flags", machine.isa_flags},
          {"logical_cores", machine.logical_cores},
          {"read_bandwidth_gb_s", machine.read_bandwidth_gb_s},
          {"read_bandwidth_threads", machine.bandwidth_threads},
          {"kvjit_commit", machine.kvjit_commit},
          // What kvjit's CPU kernels ran as: the ISA ($KVJIT_CPU_ISA caps
          // it), the microarchitecture the layouts were chosen for, and the
          // numerics ($KVJIT_CPU_NUMERICS).
          {"kvjit_cpu_isa", std::string(cpu::CpuIsaName(cpu::BestCpuIsa()))},
          {"kvjit_cpu_model", std::string(cpu::CpuModelName(cpu::HostCpuModel()))},
          {"kvjit_cpu_numerics", std::string(cpu::CpuNumericsName(cpu::ProcessCpuNumerics()))}};
}

}  // namespace kvjit::cli
