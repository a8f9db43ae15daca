#ifndef KVJIT_CODEGEN_CUDA_CUDAMODULEWRITER_H_
#define KVJIT_CODEGEN_CUDA_CUDAMODULEWRITER_H_

#include "codegen/cuda/CudaModuleSpec.h"
#include "flatbuffers/flatbuffers.h"
#include "runtime/schema/kvx_generated.h"

namespace kvjit::codegen::cuda {

// Serialises generated kernels and NVRTC's output for them as the
// executable's CudaModule table.
flatbuffers::Offset<kvx::CudaModule> AddCudaModule(flatbuffers::FlatBufferBuilder& builder,
                                                   const CudaModuleSpec& module,
                                                   const CudaBinary& binary);

}  // namespace kvjit::codegen::cuda

#endif  // KVJIT_CODEGEN_CUDA_CUDAMODULEWRITER_H_
