#include "runtime/cuda/CublasGemm.h"

#include <limits>

#include "absl/strings/str_cat.h"
#include "runtime/core/StatusMacros.h"

namespace kvjit::cuda {

absl::Status CublasStatusToStatus(cublasStatus_t status, absl::string_view call) {
  if (status == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  const std::string what = absl::StrCat(call, " failed: ", cublasGetStatusName(status), " (",
                                        cublasGetStatusString(status), ")");
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
  cublasHandle_t handle = nullptr;
  KVJIT_RETURN_IF_ERROR(CublasStatusToStatus(cublasCreate(&handle), "cublasCreate"));
  std::unique_ptr<CublasGemm> gemm(new CublasGemm(handle));
  // The driver API's CUstream is the runtime's cudaStream_t.
  KVJIT_RETURN_IF_ERROR(CublasStatusToStatus(
      cublasSetStream(handle, reinterpret_cast<cudaStream_t>(stream)), "cublasSetStream"));
  return gemm;
}

CublasGemm::~CublasGemm() { cublasDestroy(handle_); }

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
      cublasGemmEx(handle_, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(out), static_cast<int>(rows),
                   static_cast<int>(in), &alpha, reinterpret_cast<const void*>(w), CUDA_R_16F,
                   static_cast<int>(in), reinterpret_cast<const void*>(x), CUDA_R_16F,
                   static_cast<int>(in), &beta, reinterpret_cast<void*>(y), CUDA_R_32F,
                   static_cast<int>(out), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
      absl::StrCat("cublasGemmEx (", rows, "x", in, " · ", out, "x", in, "ᵀ)"));
}

}  // namespace kvjit::cuda
