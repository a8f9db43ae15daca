// `kvjit compile --target cuda` end to end, without a GPU: the executable
// carries the CPU program and its CUDA module, and loads. A build without
// the CUDA toolkit refuses the target and says why.

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"
#include "codegen/driver/Compiler.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/core/BuildConfig.h"
#include "runtime/exec/Executable.h"
#include "tests/unit/common/TestPaths.h"

namespace kvjit::codegen {
namespace {

using ::testing::HasSubstr;

class CudaCompileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    directory_ =
        std::filesystem::temp_directory_path() / absl::StrCat("kvjit-cuda-compile-test-", getpid());
    std::filesystem::create_directories(directory_);
    // Compile for real, not from the user's cache.
    setenv("KVJIT_NVRTC_CACHE_DIR", (directory_ / "nvrtc").c_str(), 1);
    model_ = kvjit::testing::SharedPath("models/stories260K.gguf");
  }
  void TearDown() override { std::filesystem::remove_all(directory_); }

  std::filesystem::path directory_;
  std::string model_;
};

// A build has the test of its own behaviour, with or without the toolkit, and
// not the other's: neither is a skip that CI would count as not run.
#if KVJIT_HAVE_CUDA
TEST_F(CudaCompileTest, WritesALoadableExecutableWithItsCudaModule) {
  if (model_.empty()) GTEST_SKIP() << "models/stories260K.gguf is not in the shared folder";
  CompileOptions options;
  options.target = "cuda";
  options.cuda_arch = 80;
  options.cache_dtype = "f16";
  const std::string output = (directory_ / "stories.kvx").string();
  ASSERT_TRUE(CompileModel(model_, output, options, nullptr).ok());
  absl::StatusOr<std::unique_ptr<runtime::Executable>> loaded = runtime::Executable::Load(output);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const kvx::CudaModule* cuda = (*loaded)->cuda();
  ASSERT_NE(cuda, nullptr);
  EXPECT_EQ(cuda->arch(), 80u);
  EXPECT_EQ(cuda->instructions()->size(), (*loaded)->program().instructions()->size());
  EXPECT_GT(cuda->cubin()->size(), 0u);
  EXPECT_THAT(cuda->ptx()->str(), HasSubstr(".target sm_80"));
  EXPECT_THAT(cuda->source()->str(), HasSubstr("struct LaunchArgs"));
  EXPECT_EQ((*loaded)->kv_layout().key_type(), kvx::StorageType::F16);
  EXPECT_EQ((*loaded)->kv_layout().value_type(), kvx::StorageType::F16);
  // NVRTC's output went to the cache the environment names.
  EXPECT_FALSE(std::filesystem::is_empty(directory_ / "nvrtc"));
}

#else
TEST_F(CudaCompileTest, RefusesTheTargetWithoutTheToolkit) {
  if (model_.empty()) GTEST_SKIP() << "models/stories260K.gguf is not in the shared folder";
  CompileOptions options;
  options.target = "cuda";
  absl::Status status = CompileModel(model_, (directory_ / "x.kvx").string(), options, nullptr);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(status.message(), HasSubstr("built without the CUDA toolkit"));
}
#endif  // KVJIT_HAVE_CUDA

TEST_F(CudaCompileTest, RefusesAnUnknownTarget) {
  CompileOptions options;
  options.target = "metal";
  absl::Status status = CompileModel(model_, (directory_ / "x.kvx").string(), options, nullptr);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("--target must be cpu or cuda, got 'metal'"));
}

}  // namespace
}  // namespace kvjit::codegen
