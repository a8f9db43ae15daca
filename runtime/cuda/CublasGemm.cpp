#include "runtime/cuda/CublasGemm.h"

#include <dlfcn.h>

#include <limits>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "runtime/core/StatusMacros.h"

namespace kvjit::cuda {
namespace {

#define KVJIT_STRINGIFY_INNER(x) #x
#define KVJIT_STRINGIFY(x) KVJIT_STRINGIFY_INNER(x)

// cuBLAS, loaded when the first GEMM handle is made rather than linked: the
// library and cuBLASLt beneath it take ~60 MiB of memory and a noticeable
// part of start-up just by being loaded, which a CPU run must not pay.
struct CublasLibrary {
  decltype(&cublasCreate_v2) create = nullptr;
  decltype(&cublasDestroy_v2) destroy = nullptr;
  decltype(&cublasSetStream_v2) set_stream = nullptr;
  // cublas_api.h overloads cublasGemmEx in C++; this is the C entry point.
  cublasStatus_t (*gemm_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                            const void*, const void*, cudaDataType, int, const void*, cudaDataType,
                            int, const void*, void*, cudaDataType, int, cublasComputeType_t,
                            cublasGemmAlgo_t) = nullptr;
  decltype(&cublasGetStatusName) status_name = nullptr;
  decltype(&cublasGetStatusString) status_string = nullptr;
};

constexpr const char* kCublasLibrary = "libcublas.so." KVJIT_STRINGIFY(CUBLAS_VER_MAJOR);

// Loaded once per process; an error says why it could not be.
const absl::StatusOr<CublasLibrary>& Cublas() {
  static const absl::StatusOr<CublasLibrary> library = []() -> absl::StatusOr<CublasLibrary> {
    void* handle = ::dlopen(kCublasLibrary, RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* reason = ::dlerror();
      return absl::FailedPreconditionError(absl::StrCat(
          "cuBLAS is needed for prefill GEMMs on the GPU, but ", kCublasLibrary,
          " cannot be loaded (", reason != nullptr ? reason : "dlopen failed",
          "): install the CUDA toolkit's cuBLAS or add its folder to LD_LIBRARY_PATH"));
    }
    CublasLibrary cublas;
    const auto load = [&](auto& entry, const char* name) -> absl::Status {
      entry = reinterpret_cast<std::remove_reference_t<decltype(entry)>>(::dlsym(handle, name));
      if (entry != nullptr) return absl::OkStatus();
      return absl::FailedPreconditionError(absl::StrCat(kCublasLibrary, " has no ", name));
    };
    KVJIT_RETURN_IF_ERROR(load(cublas.create, "cublasCreate_v2"));
    KVJIT_RETURN_IF_ERROR(load(cublas.destroy, "cublasDestroy_v2"));
    KVJIT_RETURN_IF_ERROR(load(cublas.set_stream, "cublasSetStream_v2"));
    KVJIT_RETURN_IF_ERROR(load(cublas.gemm_ex, "cublasGemmEx"));
    KVJIT_RETURN_IF_ERROR(load(cublas.status_name, "cublasGetStatusName"));
    KVJIT_RETURN_IF_ERROR(load(cublas.status_string, "cublasGetStatusString"));
    return cublas;
  }();
  return library;
}

}  // namespace

absl::Status CublasStatusToStatus(cublasStatus_t status, absl::string_view call) {
  if (status == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  const absl::StatusOr<CublasLibrary>& cublas = Cublas();
  const std::string what =
      cublas.ok() ? absl::StrCat(call, " failed: ", cublas->status_name(status), " (",
                                 cublas->status_string(status), ")")
                  : absl::StrCat(call, " failed: cuBLAS status ", static_cast<int>(status));
  switch (status) {
    case CUBLAS_STATUS_ALLOC_FAILED:
      return absl::ResourceExhaustedError(what);
    case CUBLAS_STATUS_NOT_INITIALIZED:
    case CUBLAS_STATUS_ARCH_MISMATCH:
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return absl::FailedPreconditionError(what);
    case CUBLAS_STATUS_INVALID_VALUE:
      return absl::InvalidArgumentError(what);
    default:
      return absl::InternalError(what);
  }
}

absl::StatusOr<std::unique_ptr<CublasGemm>> CublasGemm::Create(CUstream stream) {
  const absl::StatusOr<CublasLibrary>& cublas = Cublas();
  if (!cublas.ok()) return cublas.status();
  cublasHandle_t handle = nullptr;
  KVJIT_RETURN_IF_ERROR(CublasStatusToStatus(cublas->create(&handle), "cublasCreate"));
  std::unique_ptr<CublasGemm> gemm(new CublasGemm(handle));
  // The driver API's CUstream is the runtime's cudaStream_t.
  KVJIT_RETURN_IF_ERROR(CublasStatusToStatus(
      cublas->set_stream(handle, reinterpret_cast<cudaStream_t>(stream)), "cublasSetStream"));
  return gemm;
}

// A handle exists only where Create loaded the library.
CublasGemm::~CublasGemm() { Cublas()->destroy(handle_); }

absl::Status CublasGemm::LinearF16(CUdeviceptr x, CUdeviceptr w, CUdeviceptr y, int64_t rows,
                                   int64_t in, int64_t out) const {
  constexpr int64_t kMax = std::numeric_limits<int>::max();
  if (rows <= 0 || in <= 0 || out <= 0 || rows > kMax || in > kMax || out > kMax) {
    return absl::InvalidArgumentError(absl::StrCat("a GEMM of ", rows, " rows, ", in,
                                                   " inputs and ", out,
                                                   " outputs is outside cuBLAS's int range"));
  }
  const float alpha = 1.0f;
  const float beta = 0.0f;
  // Column-major: yᵀ[out, rows] = op(w)[out, in] · xᵀ[in, rows], with w's
  // row-major [out, in] read as the column-major [in, out] matrix transposed.
  return CublasStatusToStatus(
      Cublas()->gemm_ex(handle_, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(out), static_cast<int>(rows),
                   static_cast<int>(in), &alpha, reinterpret_cast<const void*>(w), CUDA_R_16F,
                   static_cast<int>(in), reinterpret_cast<const void*>(x), CUDA_R_16F,
                   static_cast<int>(in), &beta, reinterpret_cast<void*>(y), CUDA_R_32F,
                   static_cast<int>(out), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
      absl::StrCat("cublasGemmEx (", rows, "x", in, " · ", out, "x", in, "ᵀ)"));
}

}  // namespace kvjit::cuda
