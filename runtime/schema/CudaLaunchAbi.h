#ifndef KVJIT_RUNTIME_SCHEMA_CUDALAUNCHABI_H_
#define KVJIT_RUNTIME_SCHEMA_CUDALAUNCHABI_H_

// The launch contract between the CUDA kernels kvjit generates
// (codegen/cuda) and the runtime that launches them (runtime/cuda). The
// generated translation unit embeds this very file (its text is copied into
// the source at build time), so both sides read one definition.
//
// Plain C++17 with no includes under NVRTC, whose prelude defines the
// fixed-width integer types.
#ifndef __CUDACC_RTC__
#include <cstdint>
#endif

namespace kvjit {
namespace cuda_abi {

// Bumped on any change to LaunchArgs or to the buffer order below; a module
// written for another version does not load (CudaModule.abi_version).
inline constexpr uint32_t kKernelAbiVersion = 1;

inline constexpr int kMaxLaunchBuffers = 16;

// The one parameter of every generated kernel, passed by value
// (cuLaunchKernel's kernelParams = {&args}). Every launch of an instruction
// receives the same LaunchArgs.
//
// buffers[], in this order, for instruction i of the program:
//   [0, I)        the instruction's inputs, as listed (I = inputs.size()):
//                   Arena  -> arena base + offset (f32 elements),
//                   Weight -> the weight's bytes exactly as stored in its file
//                             (its StorageType, GGUF blocks for quantized
//                             types), at least 16-byte aligned,
//                   Input  -> the step input (int32 array) named by index;
//   [I, I + O)    its outputs, as listed (O = outputs.size()), all Arena;
//   I + O         for KvWrite and KvAttention, the KV pool base advanced to
//                 the instruction's layer: pool + layer × layer_stride_bytes
//                 (Executable.kv_layout), so that every layer shares one
//                 kernel; null for the others;
//   I + O + 1     the scratch base (null where the path's scratch is empty),
//                 256-byte aligned; its contents do not outlive the
//                 instruction;
//   the rest      null.
// KvPoolBuffer() and ScratchBuffer() give those two indices.
struct LaunchArgs {
  void* buffers[kMaxLaunchBuffers];
  int32_t tokens;       // T: new tokens in the step
  int32_t logits_rows;  // L: rows that produce logits
  int32_t sequences;    // S: sequences in the step
  int32_t max_blocks;   // columns of the block tables
};

static_assert(sizeof(void*) == 8, "kvjit's CUDA kernels assume 64-bit pointers");
static_assert(sizeof(LaunchArgs) == 8 * kMaxLaunchBuffers + 16,
              "LaunchArgs must have the same layout on the host and the device");

constexpr int KvPoolBuffer(int inputs, int outputs) { return inputs + outputs; }
constexpr int ScratchBuffer(int inputs, int outputs) { return inputs + outputs + 1; }

// The largest number of inputs an instruction may have so that its buffers,
// the KV pool and the scratch fit LaunchArgs (one output).
inline constexpr int kMaxInstructionInputs = kMaxLaunchBuffers - 3;

// Scratch regions inside one path (e.g. the f16 GEMM operands) start at
// multiples of this.
inline constexpr uint64_t kScratchAlignment = 256;

}  // namespace cuda_abi
}  // namespace kvjit

#endif  // KVJIT_RUNTIME_SCHEMA_CUDALAUNCHABI_H_
