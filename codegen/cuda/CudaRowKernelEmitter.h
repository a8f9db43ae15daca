#ifndef KVJIT_CODEGEN_CUDA_CUDAROWKERNELEMITTER_H_
#define KVJIT_CODEGEN_CUDA_CUDAROWKERNELEMITTER_H_

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "runtime/schema/kvx_generated.h"

// What a row-wise op's CUDA emitter (codegen/cuda/rowops) sees of the CUDA
// code generator, which implements it (CudaCodegen.cpp): the op writes its
// kernel's text, the generator reads the instruction's tensors and places
// the kernel and its launch. The kernel computes what the op's CPU kernel
// (runtime/ops) computes; every shape, constant and weight format the
// instruction fixes is baked into its text.
namespace kvjit::codegen::cuda {

class CudaRowKernelEmitter {
 public:
  virtual ~CudaRowKernelEmitter() = default;

  virtual const kvx::Instruction& instruction() const = 0;

  // A C++ expression loading element `index` of input `input` as a float:
  // arena and f32 weights directly (a column view through its row stride),
  // f16 and bf16 weights converted; a quantized weight is an error.
  virtual absl::StatusOr<std::string> ElementLoad(int input, absl::string_view index) const = 0;

  // The index in the kernel's LaunchArgs buffers of output `output`.
  virtual int OutputBuffer(int output) const = 0;

  // The instruction's kernel, the same on its decode and prefill paths:
  // `text` defines `extern "C" __global__ KVJIT_KERNEL(const
  // kvjit::cuda_abi::LaunchArgs args)` (the generator names it after
  // `stem`), launched with `threads` threads per block and one block per
  // index of dimensions [0, end) of input `input`.
  virtual void AddRowKernel(absl::string_view stem, const std::string& text, uint32_t threads,
                            int input, size_t end) = 0;

  // The instruction's kernel, one thread per element of output 0: `body`
  // computes element `i` (an int64_t below the output's element count).
  virtual void AddElementKernel(absl::string_view stem, const std::string& comment,
                                const std::string& body) = 0;
};

// ---- Writing kernel text ----

// `text` with each `@KEY@` replaced by its value.
std::string Fill(absl::string_view text,
                 std::initializer_list<std::pair<absl::string_view, std::string>> values);

// A float as an exact C++ literal (hexadecimal), e.g. 0x1.4f8b58p-17f.
std::string FloatLiteral(float value);

// The static size of a reference's dimension, or an error naming it.
absl::StatusOr<int64_t> StaticDim(const kvx::TensorRef& ref, size_t dim, absl::string_view what);

// Threads for a block that walks a row of `width`: a multiple of 32 up to 256.
uint32_t RowThreads(int64_t width);

}  // namespace kvjit::codegen::cuda

#endif  // KVJIT_CODEGEN_CUDA_CUDAROWKERNELEMITTER_H_
