#include "codegen/cuda/CudaModuleWriter.h"

#include "runtime/schema/CudaLaunchAbi.h"

namespace kvjit::codegen::cuda {
namespace {

using flatbuffers::Offset;

Offset<kvx::CudaLaunch> AddLaunch(flatbuffers::FlatBufferBuilder& builder,
                                  const LaunchSpec& launch) {
  return kvx::CreateCudaLaunchDirect(builder, launch.kernel, launch.block_threads, &launch.grid_x,
                                     &launch.grid_y, &launch.grid_z, /*dynamic_shared_bytes=*/0);
}

Offset<kvx::CudaPath> AddPath(flatbuffers::FlatBufferBuilder& builder, const PathSpec& path) {
  std::vector<Offset<kvx::CudaLaunch>> launches, epilogue;
  for (const LaunchSpec& launch : path.launches) launches.push_back(AddLaunch(builder, launch));
  for (const LaunchSpec& launch : path.epilogue) epilogue.push_back(AddLaunch(builder, launch));
  Offset<kvx::CudaGemm> gemm = 0;
  if (path.gemm) {
    gemm = kvx::CreateCudaGemmDirect(builder, &path.gemm->m, path.gemm->n, path.gemm->k,
                                     path.gemm->weight_offset, path.gemm->activation_offset);
  }
  return kvx::CreateCudaPathDirect(builder, &launches, gemm, &epilogue, &path.scratch_bytes,
                                   path.scratch_fixed_bytes);
}

}  // namespace

Offset<kvx::CudaModule> AddCudaModule(flatbuffers::FlatBufferBuilder& builder,
                                      const CudaModuleSpec& module, const CudaBinary& binary) {
  std::vector<Offset<kvx::CudaKernel>> kernels;
  for (const std::string& name : module.kernel_names) {
    kernels.push_back(kvx::CreateCudaKernelDirect(builder, name.c_str()));
  }
  std::vector<Offset<kvx::CudaInstruction>> instructions;
  for (const InstructionSpec& instruction : module.instructions) {
    Offset<kvx::CudaPath> decode = AddPath(builder, instruction.decode);
    Offset<kvx::CudaPath> prefill = AddPath(builder, instruction.prefill);
    instructions.push_back(
        kvx::CreateCudaInstructionDirect(builder, &instruction.rows, decode, prefill));
  }
  std::vector<Offset<flatbuffers::String>> options;
  for (const std::string& option : binary.options) options.push_back(builder.CreateString(option));
  return kvx::CreateCudaModuleDirect(builder, cuda_abi::kKernelAbiVersion, binary.arch,
                                     &binary.cubin, binary.ptx.c_str(), module.source.c_str(),
                                     binary.nvrtc_version, &options, &kernels, &instructions,
                                     module.prefill_min_rows);
}

}  // namespace kvjit::codegen::cuda
