#include "runtime/cpu/CpuIsa.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iterator>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace kvjit::cpu {
namespace {

bool DetectAvx2() {
#if defined(KVJIT_CPU_HAVE_AVX2_KERNELS)
  // libgcc's feature bits also check that the OS saves the AVX state (XCR0).
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
#else
  return false;
#endif
}

bool DetectAvx512Vnni() {
#if defined(KVJIT_CPU_HAVE_AVX2_KERNELS)
  // As for AVX2, libgcc also checks that the OS saves the AVX-512 state.
  __builtin_cpu_init();
  return DetectAvx2() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
#else
  return false;
#endif
}

// AMD's family 19h spans Zen 3 and Zen 4 (only Zen 4 has AVX-512); 1Ah is
// Zen 5.
CpuModel DetectCpuModel() {
#if defined(__x86_64__) || defined(__i386__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(0, &eax, &ebx, &ecx, &edx) == 0) return CpuModel::kGeneric;
  const bool amd = ebx == 0x68747541 && edx == 0x69746e65 && ecx == 0x444d4163;  // "AuthenticAMD"
  if (!amd || __get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0) return CpuModel::kGeneric;
  const unsigned base_family = (eax >> 8) & 0xf;
  const unsigned family = base_family == 0xf ? base_family + ((eax >> 20) & 0xff) : base_family;
  if (family == 0x19 && CpuSupports(CpuIsa::kAvx512Vnni)) return CpuModel::kZen4;
  if (family == 0x1a && CpuSupports(CpuIsa::kAvx512Vnni)) return CpuModel::kZen5;
#endif
  return CpuModel::kGeneric;
}

}  // namespace

absl::string_view CpuModelName(CpuModel model) {
  switch (model) {
    case CpuModel::kGeneric: return "generic";
    case CpuModel::kZen4: return "zen4";
    case CpuModel::kZen5: return "zen5";
  }
  return "unknown";
}

CpuModel HostCpuModel() {
  static const CpuModel model = DetectCpuModel();
  return model;
}

absl::string_view CpuIsaName(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kPortable: return "portable";
    case CpuIsa::kAvx2: return "avx2";
    case CpuIsa::kAvx512Vnni: return "avx512vnni";
  }
  return "unknown";
}

bool CpuSupports(CpuIsa isa) {
  static const bool has_avx2 = DetectAvx2();
  static const bool has_avx512_vnni = DetectAvx512Vnni();
  switch (isa) {
    case CpuIsa::kPortable: return true;
    case CpuIsa::kAvx2: return has_avx2;
    case CpuIsa::kAvx512Vnni: return has_avx512_vnni;
  }
  return false;
}

bool CpuSupportsAvx512Bf16() {
#if defined(KVJIT_CPU_HAVE_AVX2_KERNELS)
  static const bool has_avx512_bf16 = [] {
    __builtin_cpu_init();
    return CpuSupports(CpuIsa::kAvx512Vnni) && __builtin_cpu_supports("avx512bf16");
  }();
  return has_avx512_bf16;
#else
  return false;
#endif
}

CpuIsa BestCpuIsa() {
  // $KVJIT_CPU_ISA caps the choice: to compare kernels, or to run as a
  // machine with less would (every ISA gives the same bits).
  static const CpuIsa best = [] {
    constexpr CpuIsa kMostCapableFirst[] = {CpuIsa::kAvx512Vnni, CpuIsa::kAvx2, CpuIsa::kPortable};
    const char* cap = std::getenv("KVJIT_CPU_ISA");
    bool allowed = cap == nullptr || *cap == '\0';
    if (!allowed && std::none_of(std::begin(kMostCapableFirst), std::end(kMostCapableFirst),
                                 [&](CpuIsa isa) { return CpuIsaName(isa) == cap; })) {
      std::fprintf(stderr, "kvjit: KVJIT_CPU_ISA=%s is none of avx512vnni, avx2, portable; ignored\n", cap);
      allowed = true;
    }
    for (CpuIsa isa : kMostCapableFirst) {
      allowed = allowed || CpuIsaName(isa) == cap;
      if (allowed && CpuSupports(isa)) return isa;
    }
    return CpuIsa::kPortable;
  }();
  return best;
}

}  // namespace kvjit::cpu
