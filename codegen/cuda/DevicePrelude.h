#ifndef KVJIT_CODEGEN_CUDA_DEVICEPRELUDE_H_
#define KVJIT_CODEGEN_CUDA_DEVICEPRELUDE_H_

#include <string>

namespace kvjit::codegen::cuda {

// The start of every generated translation unit: the fixed-width integer
// types NVRTC lacks, runtime/schema/CudaLaunchAbi.h verbatim (LaunchArgs), and the
// device functions the kernels share: f16/bf16 conversions, warp and block
// reductions, and `dequant_<type>(row, group, cols, out)`, which writes the
// 32 elements of group `group` of a weight row in its storage type as f32
// (elements at or past `cols` as 0), with ggml's arithmetic.
const std::string& DevicePrelude();

}  // namespace kvjit::codegen::cuda

#endif  // KVJIT_CODEGEN_CUDA_DEVICEPRELUDE_H_
