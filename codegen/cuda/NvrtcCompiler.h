#ifndef KVJIT_CODEGEN_CUDA_NVRTCCOMPILER_H_
#define KVJIT_CODEGEN_CUDA_NVRTCCOMPILER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "codegen/cuda/CudaModuleSpec.h"
#include "codegen/cuda/NvrtcCache.h"

// The NVRTC driver: CUDA C++ to a cubin and PTX, without a GPU.
namespace kvjit::codegen::cuda {

struct NvrtcOptions {
  uint32_t arch = 90;  // compute capability × 10: sm_90
  // --use_fast_math: approximate division, square roots, exponentials and
  // sines (rope's large angles lose accuracy), denormals flushed.
  bool fast_math = false;
};

// NVRTC's options for `options` (the architecture excluded: it is part of
// CudaBinary and of the cache key separately).
std::vector<std::string> NvrtcOptionList(const NvrtcOptions& options);

// NVRTC's version as major × 1000 + minor × 10, or 0 where it cannot say.
uint32_t NvrtcVersion();

struct NvrtcResult {
  CudaBinary binary;
  bool cache_hit = false;
  std::string log;  // NVRTC's warnings, where it compiled
};

// Compiles `source`, one translation unit, into a cubin for sm_<arch> and
// PTX for the same virtual architecture (which newer GPUs JIT-compile),
// through `cache` where it is not null (a failure to store is not an
// error: the result stands). A compile error is InvalidArgument carrying
// NVRTC's log and naming `name` (the model) and the architecture.
absl::StatusOr<NvrtcResult> CompileWithNvrtc(const std::string& source, const std::string& name,
                                             const NvrtcOptions& options, const NvrtcCache* cache);

}  // namespace kvjit::codegen::cuda

#endif  // KVJIT_CODEGEN_CUDA_NVRTCCOMPILER_H_
