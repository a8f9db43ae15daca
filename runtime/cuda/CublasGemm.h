#ifndef KVJIT_RUNTIME_CUDA_CUBLASGEMM_H_
#define KVJIT_RUNTIME_CUDA_CUBLASGEMM_H_

#include <cublas_v2.h>
#include <cuda.h>

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kvjit::cuda {

// A cuBLAS handle whose work is ordered on one stream (the device's), for
// the prefill GEMMs: many tokens at once, where tensor cores beat the
// generated GEMV kernels.
class CublasGemm {
 public:
  static absl::StatusOr<std::unique_ptr<CublasGemm>> Create(CUstream stream);
  ~CublasGemm();
  CublasGemm(const CublasGemm&) = delete;
  CublasGemm& operator=(const CublasGemm&) = delete;

  // y[rows, out] = x[rows, in] · w[out, in]ᵀ, row-major, x and w f16, y f32,
  // accumulated in f32: a Linear over `rows` tokens with the weight in its
  // [out, in] layout. cuBLAS is column-major, so this is computed as
  // yᵀ = w · xᵀ, which reads the same memory without transposing anything.
  absl::Status LinearF16(CUdeviceptr x, CUdeviceptr w, CUdeviceptr y, int64_t rows, int64_t in,
                         int64_t out) const;

 private:
  explicit CublasGemm(cublasHandle_t handle) : handle_(handle) {}

  cublasHandle_t handle_;
};

// The status for a cuBLAS result: OK for CUBLAS_STATUS_SUCCESS, otherwise an
// error naming `call` and the status's name and description.
absl::Status CublasStatusToStatus(cublasStatus_t status, absl::string_view call);

}  // namespace kvjit::cuda

#endif  // KVJIT_RUNTIME_CUDA_CUBLASGEMM_H_
