#include "runtime/cpu/CpuIsa.h"

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

}  // namespace

absl::string_view CpuIsaName(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kPortable: return "portable";
    case CpuIsa::kAvx2: return "avx2";
  }
  return "unknown";
}

bool CpuSupports(CpuIsa isa) {
  static const bool has_avx2 = DetectAvx2();
  switch (isa) {
    case CpuIsa::kPortable: return true;
    case CpuIsa::kAvx2: return has_avx2;
  }
  return false;
}

CpuIsa BestCpuIsa() { return CpuSupports(CpuIsa::kAvx2) ? CpuIsa::kAvx2 : CpuIsa::kPortable; }

}  // namespace kvjit::cpu
