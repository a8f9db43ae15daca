#ifndef KVJIT_RUNTIME_CPU_CPUISA_H_
#define KVJIT_RUNTIME_CPU_CPUISA_H_

#include "absl/strings/string_view.h"

namespace kvjit::cpu {

// The instruction sets the matrix kernels come in. All compute the same
// numbers bit for bit (see MatMul.h); the portable one is always built.
enum class CpuIsa {
  kPortable,
  kAvx2,  // AVX2 + FMA + F16C, compiled in on x86-64 only.
  // The AVX2 kernels, the four-row ones (prefill, batched decode) with their
  // byte dot products in AVX-512 VL + VNNI (vpdpbusd): the same bits, fewer
  // instructions.
  kAvx512Vnni,
};

absl::string_view CpuIsaName(CpuIsa isa);

// Whether this build has kernels for `isa` and this CPU (and OS) can run them.
bool CpuSupports(CpuIsa isa);

// The fastest supported ISA; checked once.
CpuIsa BestCpuIsa();

}  // namespace kvjit::cpu

#endif  // KVJIT_RUNTIME_CPU_CPUISA_H_
