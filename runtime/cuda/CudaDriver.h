#ifndef KVJIT_RUNTIME_CUDA_CUDADRIVER_H_
#define KVJIT_RUNTIME_CUDA_CUDADRIVER_H_

// cuda.h is included for its types and declarations only: libcuda is loaded
// at run time (dlopen), so that builds and CPU runs work on machines without
// an NVIDIA driver.
#include <cuda.h>

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "runtime/core/StatusMacros.h"

namespace kvjit::cuda {

// The driver entry points kvjit calls. cuda.h maps each name to the versioned
// symbol this toolkit's ABI means (cuMemAlloc → cuMemAlloc_v2, cuGraphInstantiate
// → cuGraphInstantiateWithFlags, ...); the members and the symbols looked up
// follow that mapping because the names are macro-expanded before use.
#define KVJIT_CUDA_DRIVER_FUNCTIONS(X) \
  X(cuInit)                            \
  X(cuDriverGetVersion)                \
  X(cuDeviceGetCount)                  \
  X(cuDeviceGet)                       \
  X(cuDeviceGetName)                   \
  X(cuDeviceGetAttribute)              \
  X(cuDeviceTotalMem)                  \
  X(cuDevicePrimaryCtxRetain)          \
  X(cuDevicePrimaryCtxRelease)         \
  X(cuCtxSetCurrent)                   \
  X(cuModuleLoadDataEx)                \
  X(cuModuleUnload)                    \
  X(cuModuleGetFunction)               \
  X(cuFuncSetAttribute)                \
  X(cuLaunchKernel)                    \
  X(cuMemGetInfo)                      \
  X(cuMemAlloc)                        \
  X(cuMemFree)                         \
  X(cuMemAllocHost)                    \
  X(cuMemFreeHost)                     \
  X(cuMemcpyHtoDAsync)                 \
  X(cuMemcpyDtoHAsync)                 \
  X(cuMemcpyDtoDAsync)                 \
  X(cuMemsetD8Async)                   \
  X(cuStreamCreate)                    \
  X(cuStreamDestroy)                   \
  X(cuStreamSynchronize)               \
  X(cuStreamQuery)                     \
  X(cuStreamBeginCapture)              \
  X(cuStreamEndCapture)                \
  X(cuGraphInstantiate)                \
  X(cuGraphLaunch)                     \
  X(cuGraphDestroy)                    \
  X(cuGraphExecDestroy)                \
  X(cuEventCreate)                     \
  X(cuEventDestroy)                    \
  X(cuEventRecord)                     \
  X(cuEventElapsedTime)                \
  X(cuGetErrorName)                    \
  X(cuGetErrorString)

// libcuda's entry points, resolved once.
class CudaDriver {
 public:
  // The process's driver: libcuda.so.1 (or the library $KVJIT_CUDA_DRIVER
  // names: a stand-in for tests) loaded and cuInit(0) called on first use.
  // Without a driver, an error that says so and that the CPU backend still
  // works; without a GPU, cuInit's error.
  static absl::StatusOr<const CudaDriver*> Get();

  // Loads `library` and resolves every entry point, without calling cuInit;
  // Get() uses it with "libcuda.so.1", tests with other names.
  static absl::StatusOr<std::unique_ptr<CudaDriver>> Load(const std::string& library);

  ~CudaDriver();
  CudaDriver(const CudaDriver&) = delete;
  CudaDriver& operator=(const CudaDriver&) = delete;

  // OK for CUDA_SUCCESS, otherwise an error naming `call` (what was
  // attempted, as the message should say it) and the result's name and
  // description.
  absl::Status Check(CUresult result, absl::string_view call) const;

#define KVJIT_CUDA_DRIVER_MEMBER(name) decltype(&::name) name = nullptr;
  KVJIT_CUDA_DRIVER_FUNCTIONS(KVJIT_CUDA_DRIVER_MEMBER)
#undef KVJIT_CUDA_DRIVER_MEMBER

 private:
  explicit CudaDriver(void* library) : library_(library) {}

  void* library_;
};

// The status for `result` returned by `call`, given the driver's name and
// description of it (either may be null when the driver does not know the
// code). CUDA_SUCCESS is OK; out of memory is RESOURCE_EXHAUSTED; a missing
// or unusable device or kernel image is FAILED_PRECONDITION; a bad argument
// is INVALID_ARGUMENT; anything else INTERNAL.
absl::Status CuResultToStatus(CUresult result, const char* name, const char* description,
                              absl::string_view call);

// "cuMemAlloc" for the call text "cuMemAlloc(&pointer, bytes)".
inline absl::string_view CalledFunction(absl::string_view call) {
  return call.substr(0, call.find('('));
}

}  // namespace kvjit::cuda

// Calls a driver entry point and returns its error, naming the entry point,
// from the enclosing function:
// KVJIT_CU_RETURN_IF_ERROR(driver, cuMemAlloc(&pointer, bytes)).
#define KVJIT_CU_RETURN_IF_ERROR(driver, call) \
  KVJIT_RETURN_IF_ERROR(                       \
      (driver).Check((driver).call, ::kvjit::cuda::CalledFunction(#call)))

#endif  // KVJIT_RUNTIME_CUDA_CUDADRIVER_H_
