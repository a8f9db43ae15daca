#ifndef KVJIT_CODEGEN_CUDA_CUDAMODULESPEC_H_
#define KVJIT_CODEGEN_CUDA_CUDAMODULESPEC_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "runtime/schema/kvx_generated.h"

// What kernel generation decides for a program, before NVRTC compiles it:
// plain values mirroring the schema's Cuda* tables (runtime/schema/kvx.fbs,
// whose comments say what each field means).
namespace kvjit::codegen::cuda {

// A product of ceil(extent / divisor) factors; empty is 1 (a grid) or
// nothing (per-step scratch).
using SizeExpr = std::vector<kvx::SizeFactor>;

struct LaunchSpec {
  uint32_t kernel = 0;
  uint32_t block_threads = 0;
  SizeExpr grid_x, grid_y, grid_z;
};

struct GemmSpec {
  SizeExpr m;
  uint32_t n = 0, k = 0;
  uint64_t weight_offset = 0, activation_offset = 0;
};

struct PathSpec {
  std::vector<LaunchSpec> launches;
  std::optional<GemmSpec> gemm;
  std::vector<LaunchSpec> epilogue;
  SizeExpr scratch_bytes;
  uint64_t scratch_fixed_bytes = 0;
};

struct InstructionSpec {
  SizeExpr rows;
  PathSpec decode, prefill;
};

struct CudaModuleSpec {
  std::string source;                     // the whole translation unit
  std::vector<std::string> kernel_names;  // entries of `source`, by kernel index
  std::vector<InstructionSpec> instructions;
  uint32_t prefill_min_rows = 0;
};

// NVRTC's output for one architecture.
struct CudaBinary {
  uint32_t arch = 0;  // e.g. 90
  std::vector<uint8_t> cubin;
  std::string ptx;
  uint32_t nvrtc_version = 0;  // major * 1000 + minor * 10
  std::vector<std::string> options;
};

}  // namespace kvjit::codegen::cuda

#endif  // KVJIT_CODEGEN_CUDA_CUDAMODULESPEC_H_
