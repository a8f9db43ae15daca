#include "runtime/cuda/CublasGemm.h"

#include "gtest/gtest.h"

namespace kvjit::cuda {
namespace {

TEST(CublasStatusToStatusTest, SuccessIsOk) {
  EXPECT_TRUE(CublasStatusToStatus(CUBLAS_STATUS_SUCCESS, "cublasCreate").ok());
}

TEST(CublasStatusToStatusTest, AnErrorNamesTheCallAndTheStatus) {
  absl::Status status = CublasStatusToStatus(CUBLAS_STATUS_NOT_INITIALIZED, "cublasCreate");
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(status.message().substr(0, 52), "cublasCreate failed: CUBLAS_STATUS_NOT_INITIALIZED (");
  EXPECT_EQ(CublasStatusToStatus(CUBLAS_STATUS_ALLOC_FAILED, "c").code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(CublasStatusToStatus(CUBLAS_STATUS_INVALID_VALUE, "c").code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CublasStatusToStatus(CUBLAS_STATUS_EXECUTION_FAILED, "c").code(),
            absl::StatusCode::kInternal);
}

// Without a driver, cuBLAS cannot start; the error says so instead of crashing.
TEST(CublasGemmTest, CreatingAHandleWithoutAGpuIsAnError) {
  auto gemm = CublasGemm::Create(nullptr);
  if (gemm.ok()) GTEST_SKIP() << "this machine has a GPU";
  EXPECT_NE(gemm.status().message().find("cublasCreate failed"), std::string::npos)
      << gemm.status();
}

}  // namespace
}  // namespace kvjit::cuda
