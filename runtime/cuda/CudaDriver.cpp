#include "runtime/cuda/CudaDriver.h"

#include <dlfcn.h>

#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace kvjit::cuda {
namespace {

#define KVJIT_CUDA_STRINGIFY(x) KVJIT_CUDA_STRINGIFY_INNER(x)
#define KVJIT_CUDA_STRINGIFY_INNER(x) #x

absl::StatusCode CodeFor(CUresult result) {
  switch (result) {
    case CUDA_ERROR_OUT_OF_MEMORY:
      return absl::StatusCode::kResourceExhausted;
    case CUDA_ERROR_NO_DEVICE:
    case CUDA_ERROR_INVALID_DEVICE:
    case CUDA_ERROR_NOT_INITIALIZED:
    case CUDA_ERROR_DEINITIALIZED:
    case CUDA_ERROR_NO_BINARY_FOR_GPU:
    case CUDA_ERROR_UNSUPPORTED_PTX_VERSION:
    case CUDA_ERROR_INVALID_PTX:
    case CUDA_ERROR_NOT_SUPPORTED:
    case CUDA_ERROR_SYSTEM_DRIVER_MISMATCH:
    case CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE:
      return absl::StatusCode::kFailedPrecondition;
    case CUDA_ERROR_INVALID_VALUE:
    case CUDA_ERROR_INVALID_HANDLE:
    case CUDA_ERROR_INVALID_IMAGE:
    case CUDA_ERROR_NOT_FOUND:
      return absl::StatusCode::kInvalidArgument;
    default:
      return absl::StatusCode::kInternal;
  }
}

}  // namespace

absl::Status CuResultToStatus(CUresult result, const char* name, const char* description,
                              absl::string_view call) {
  if (result == CUDA_SUCCESS) return absl::OkStatus();
  std::string what =
      name != nullptr ? std::string(name) : absl::StrCat("CUresult ", static_cast<int>(result));
  if (description != nullptr) absl::StrAppend(&what, " (", description, ")");
  return absl::Status(CodeFor(result), absl::StrCat(call, " failed: ", what));
}

absl::Status CudaDriver::Check(CUresult result, absl::string_view call) const {
  if (result == CUDA_SUCCESS) return absl::OkStatus();
  const char* name = nullptr;
  const char* description = nullptr;
  if (cuGetErrorName(result, &name) != CUDA_SUCCESS) name = nullptr;
  if (cuGetErrorString(result, &description) != CUDA_SUCCESS) description = nullptr;
  return CuResultToStatus(result, name, description, call);
}

absl::StatusOr<std::unique_ptr<CudaDriver>> CudaDriver::Load(const std::string& library) {
  void* handle = ::dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* reason = ::dlerror();
    return absl::FailedPreconditionError(absl::StrCat(
        "no NVIDIA driver: ", library, " not found (", reason != nullptr ? reason : "dlopen failed",
        "); run on the CPU instead (--device cpu)"));
  }
  std::unique_ptr<CudaDriver> driver(new CudaDriver(handle));
  // Each entry point under the symbol name cuda.h maps it to.
#define KVJIT_CUDA_DRIVER_RESOLVE(name)                                                           \
  driver->name =                                                                                  \
      reinterpret_cast<decltype(driver->name)>(::dlsym(handle, KVJIT_CUDA_STRINGIFY(name)));      \
  if (driver->name == nullptr) {                                                                  \
    return absl::FailedPreconditionError(                                                         \
        absl::StrCat(library, " has no ", KVJIT_CUDA_STRINGIFY(name),                             \
                     ": the NVIDIA driver is older than this build's CUDA ", CUDA_VERSION / 1000, \
                     ".", CUDA_VERSION % 1000 / 10,                                               \
                     " needs (or the library is not libcuda); update the driver, "                \
                     "or run on the CPU (--device cpu)"));                                        \
  }
  KVJIT_CUDA_DRIVER_FUNCTIONS(KVJIT_CUDA_DRIVER_RESOLVE)
#undef KVJIT_CUDA_DRIVER_RESOLVE
  return driver;
}

CudaDriver::~CudaDriver() {
  if (library_ != nullptr) ::dlclose(library_);
}

absl::StatusOr<const CudaDriver*> CudaDriver::Get() {
  // Loaded and initialized once; the driver stays loaded for the process.
  static const absl::StatusOr<const CudaDriver*>* const driver =
      []() -> absl::StatusOr<const CudaDriver*>* {
    const char* stand_in = std::getenv("KVJIT_CUDA_DRIVER");
    auto loaded = Load(stand_in != nullptr && *stand_in != '\0' ? stand_in : "libcuda.so.1");
    if (!loaded.ok()) return new absl::StatusOr<const CudaDriver*>(loaded.status());
    std::unique_ptr<CudaDriver> instance = *std::move(loaded);
    absl::Status init = instance->Check(instance->cuInit(0), "cuInit");
    if (!init.ok()) {
      return new absl::StatusOr<const CudaDriver*>(absl::FailedPreconditionError(
          absl::StrCat("the NVIDIA driver cannot start: ", init.message(),
                       "; run on the CPU instead (--device cpu)")));
    }
    return new absl::StatusOr<const CudaDriver*>(instance.release());
  }();
  return *driver;
}

}  // namespace kvjit::cuda
