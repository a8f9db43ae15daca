#ifndef KVJIT_RUNTIME_CPU_CPUISA_H_
#define KVJIT_RUNTIME_CPU_CPUISA_H_

#include "absl/strings/string_view.h"

namespace kvjit::cpu {

// The instruction sets the matrix kernels come in. All compute the same
// numbers bit for bit (see MatMul.h); the portable one is always built.
enum class CpuIsa {
  kPortable,
  kAvx2,  // AVX2 + FMA + F16C, compiled in on x86-64 only.
  // For single tokens, the AVX2 kernels but for the K-quants (Q4_K, Q5_K,
  // Q6_K), whose single rows run in 512-bit registers with vpmaddubsw and
  // vpdpwssd; for steps of three tokens or more (prefill, batched decode),
  // register-blocked GEMMs in 512-bit registers (BlockGemm.h): over the
  // 32-element block types with VNNI's vpdpbusd, over the K-quants with
  // vpmaddubsw and vpdpwssd, over f32, f16 and bf16 weights with FMAs on
  // weights converted once per row group. The same bits, a fraction of the
  // instructions.
  kAvx512Vnni,
};

absl::string_view CpuIsaName(CpuIsa isa);

// Whether this build has kernels for `isa` and this CPU (and OS) can run them.
bool CpuSupports(CpuIsa isa);

// Whether this build has CpuNumerics::kFast's bf16 kernels and this CPU runs
// them: kAvx512Vnni's instruction sets and AVX-512 BF16 (vdpbf16ps);
// checked once.
bool CpuSupportsAvx512Bf16();

// The fastest supported ISA; checked once.
CpuIsa BestCpuIsa();

// The microarchitectures whose kernels measured differently enough to change
// a compile-time choice (choose-weight-layouts' measured policy). kGeneric
// is every other CPU.
enum class CpuModel {
  kGeneric,
  // AMD Zen 4 (family 19h with AVX-512): its 512-bit operations run as two
  // 256-bit halves, and the one-token GEMV reads rows interleaved by 8
  // faster than GGUF's rows (docs/benchmarks.md), where Intel's AVX-512
  // cores read them slower.
  kZen4,
  // AMD Zen 5 (family 1Ah with AVX-512): full 512-bit data paths, and the
  // same preference for interleaved rows in the one-token GEMV, by more
  // storage types (docs/benchmarks.md, *Decode GEMV prefetch and Zen 5's
  // layouts*).
  kZen5,
};

absl::string_view CpuModelName(CpuModel model);

// This machine's CpuModel, from CPUID; checked once.
CpuModel HostCpuModel();

}  // namespace kvjit::cpu

#endif  // KVJIT_RUNTIME_CPU_CPUISA_H_
