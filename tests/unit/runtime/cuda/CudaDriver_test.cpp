// The driver is loaded at run time: a machine without one gets an error that
// says so, and every CUresult becomes a status naming the call and the error.

#include "runtime/cuda/CudaDriver.h"

#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvjit::cuda {
namespace {

using ::testing::HasSubstr;

TEST(CudaDriverTest, AMissingLibraryMeansNoDriverAndPointsToTheCpuBackend) {
  auto driver = CudaDriver::Load("libkvjit-no-such-driver.so.1");
  ASSERT_FALSE(driver.ok());
  EXPECT_EQ(driver.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(driver.status().message(), HasSubstr("no NVIDIA driver"));
  EXPECT_THAT(driver.status().message(), HasSubstr("libkvjit-no-such-driver.so.1 not found"));
  EXPECT_THAT(driver.status().message(), HasSubstr("--device cpu"));
}

TEST(CudaDriverTest, ALibraryWithoutTheDriverApiIsRefusedNamingTheMissingEntryPoint) {
  auto driver = CudaDriver::Load("libm.so.6");
  ASSERT_FALSE(driver.ok());
  EXPECT_THAT(driver.status().message(), HasSubstr("libm.so.6 has no cuInit"));
  EXPECT_THAT(driver.status().message(), HasSubstr("CUDA 13.0"));
}

TEST(CudaDriverTest, TheProcessDriverIsAnErrorWhereLibcudaIsAbsent) {
  auto driver = CudaDriver::Get();
  if (driver.ok()) GTEST_SKIP() << "this machine has an NVIDIA driver";
  // Either no library, or a driver that cannot start (no GPU): both say the
  // CPU backend still works.
  EXPECT_EQ(driver.status().code(), absl::StatusCode::kFailedPrecondition) << driver.status();
  EXPECT_THAT(driver.status().message(), HasSubstr("--device cpu"));
  EXPECT_TRUE(absl::StartsWith(driver.status().message(), "no NVIDIA driver: libcuda.so.1") ||
              absl::StartsWith(driver.status().message(), "the NVIDIA driver cannot start"))
      << driver.status();
}

TEST(CalledFunctionTest, IsTheCallTextUpToItsArguments) {
  EXPECT_EQ(CalledFunction("cuMemAlloc(&pointer, bytes)"), "cuMemAlloc");
  EXPECT_EQ(CalledFunction("cuInit"), "cuInit");
}

TEST(CuResultToStatusTest, SuccessIsOk) {
  EXPECT_TRUE(CuResultToStatus(CUDA_SUCCESS, "CUDA_SUCCESS", "no error", "cuInit").ok());
}

TEST(CuResultToStatusTest, AnErrorNamesTheCallTheCodeAndTheDescription) {
  absl::Status status = CuResultToStatus(CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY",
                                         "out of memory", "cuMemAlloc");
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(status.message(), "cuMemAlloc failed: CUDA_ERROR_OUT_OF_MEMORY (out of memory)");
}

TEST(CuResultToStatusTest, AnUnknownCodeIsReportedByNumber) {
  absl::Status status =
      CuResultToStatus(static_cast<CUresult>(12345), nullptr, nullptr, "cuLaunchKernel");
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(status.message(), "cuLaunchKernel failed: CUresult 12345");
}

TEST(CuResultToStatusTest, CodesMapToTheStatusACallerCanActOn) {
  EXPECT_EQ(CuResultToStatus(CUDA_ERROR_NO_DEVICE, "n", "d", "c").code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(CuResultToStatus(CUDA_ERROR_NO_BINARY_FOR_GPU, "n", "d", "c").code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(CuResultToStatus(CUDA_ERROR_INVALID_VALUE, "n", "d", "c").code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CuResultToStatus(CUDA_ERROR_ILLEGAL_ADDRESS, "n", "d", "c").code(),
            absl::StatusCode::kInternal);
}

}  // namespace
}  // namespace kvjit::cuda
