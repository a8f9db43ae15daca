#ifndef KVJIT_RUNTIME_CPU_CPUISA_H_
#define KVJIT_RUNTIME_CPU_CPUISA_H_

#include "absl/strings/string_view.h"

namespace kvjit::cpu {

// The instruction sets the matrix kernels come in. Both compute the same
// numbers bit for bit (see MatMul.h); the portable one is always built.
enum class CpuIsa {
  kPortable,
  kAvx2,  // AVX2 + FMA + F16C, compiled in on x86-64 only.
};

absl::string_view CpuIsaName(CpuIsa isa);

// Whether this build has kernels for `isa` and this CPU (and OS) can run them.
bool CpuSupports(CpuIsa isa);

// The fastest supported ISA; checked once.
CpuIsa BestCpuIsa();

}  // namespace kvjit::cpu

#endif  // KVJIT_RUNTIME_CPU_CPUISA_H_
