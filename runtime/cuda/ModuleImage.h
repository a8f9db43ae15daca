#ifndef KVJIT_RUNTIME_CUDA_MODULEIMAGE_H_
#define KVJIT_RUNTIME_CUDA_MODULEIMAGE_H_

#include "absl/status/statusor.h"

namespace kvjit::cuda {

// Which of an executable's kernel images a GPU loads. Architectures are
// written as compute capabilities times ten (sm_90 → 90); 0 means "absent".
enum class ModuleImage { kCubin, kPtx };

// The cubin runs only on its own architecture (the compiler builds it for
// exactly one), so it is used when the GPU's compute capability equals it;
// otherwise the driver JIT-compiles the PTX, which any GPU of its virtual
// architecture or newer accepts. An error names the GPU's and both images'
// architectures when neither fits.
absl::StatusOr<ModuleImage> ChooseModuleImage(int device_arch, int cubin_arch, int ptx_arch);

}  // namespace kvjit::cuda

#endif  // KVJIT_RUNTIME_CUDA_MODULEIMAGE_H_
