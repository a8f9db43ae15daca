#ifndef KVJIT_CODEGEN_CUDA_DEVICEPRELUDE_H_
#define KVJIT_CODEGEN_CUDA_DEVICEPRELUDE_H_

#include <string>

namespace kvjit::codegen::cuda {

// The start of every generated translation unit: the fixed-width integer
// types NVRTC lacks, runtime/schema/CudaLaunchAbi.h verbatim (LaunchArgs), and the
// device functions the kernels share: f16/bf16 conversions, warp and block
// reductions, and `dequant_<type>(row, group, cols, out)`, which writes the
// 32 elements of group `group` of a weight row in its storage type as f32
// (elements at or past `cols` as 0), with ggml's arithmetic; and the KV
// cache's (device/KvCache.cuh): load_kv_<type>(head, d),
// store_kv_<type>(head, d, x) for f32, f16 and bf16,
// store_block_<type>(block, x, lane) for q8_0, q4_0 and f8_e4m3 (a warp per
// 32-element block, bytes as the CPU's StoreKvRow), round_q8_0 (a query
// element as q8_0 gives it back, a warp per block), and the Walsh-Hadamard
// rotation in shared memory (hadamard_shared) or in a warp's registers
// (hadamard_lanes).
const std::string& DevicePrelude();

}  // namespace kvjit::codegen::cuda

#endif  // KVJIT_CODEGEN_CUDA_DEVICEPRELUDE_H_
