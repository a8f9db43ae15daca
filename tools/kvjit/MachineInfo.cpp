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

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"

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

nlohmann::json MachineInfoToJson(const MachineInfo& machine) {
  return {{"cpu_model", machine.cpu_model},
          {"isa_flags", machine.isa_flags},
          {"logical_cores", machine.logical_cores},
          {"read_bandwidth_gb_s", machine.read_bandwidth_gb_s},
          {"read_bandwidth_threads", machine.bandwidth_threads},
          {"kvjit_commit", machine.kvjit_commit}};
}

}  // namespace kvjit::cli
