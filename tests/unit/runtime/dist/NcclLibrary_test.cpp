// libnccl is loaded at run time: a machine without it, or with a library
// that lacks an entry point, gets an error naming the file and what to
// install; KVJIT_NCCL_LIBRARY picks the file.

#include "runtime/dist/NcclLibrary.h"

#include <cstdlib>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/runtime/dist/FakeNccl.h"

namespace kvjit::runtime::dist {
namespace {

using ::testing::HasSubstr;

// Sets KVJIT_NCCL_LIBRARY for one test and restores it after.
class ScopedNcclLibraryVariable {
 public:
  explicit ScopedNcclLibraryVariable(const char* value) {
    const char* before = std::getenv(kNcclLibraryVariable);
    had_value_ = before != nullptr;
    if (had_value_) before_ = before;
    ::setenv(kNcclLibraryVariable, value, /*overwrite=*/1);
  }
  ~ScopedNcclLibraryVariable() {
    if (had_value_) {
      ::setenv(kNcclLibraryVariable, before_.c_str(), 1);
    } else {
      ::unsetenv(kNcclLibraryVariable);
    }
  }

 private:
  bool had_value_ = false;
  std::string before_;
};

class NcclLibraryTest : public ::testing::Test {
 protected:
  void SetUp() override { FakeNccl_Reset(); }
};

TEST_F(NcclLibraryTest, TheVariableNamesTheLibraryToLoad) {
  ScopedNcclLibraryVariable variable(KVJIT_FAKE_NCCL);
  auto library = NcclLibrary::LoadConfigured();
  ASSERT_TRUE(library.ok()) << library.status();
  EXPECT_EQ((*library)->library(), KVJIT_FAKE_NCCL);
  EXPECT_EQ((*library)->version(), "2.28.3");
  int version_code = 0;
  EXPECT_EQ((*library)->ncclGetVersion(&version_code), nccl::ncclSuccess);
  EXPECT_EQ(version_code, 22803);
}

TEST_F(NcclLibraryTest, AVariableNamingNoFileIsAnErrorNamingTheVariableAndTheFile) {
  ScopedNcclLibraryVariable variable("/nonexistent/libnccl.so.2");
  auto library = NcclLibrary::LoadConfigured();
  ASSERT_FALSE(library.ok());
  EXPECT_EQ(library.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(library.status().message(), HasSubstr("/nonexistent/libnccl.so.2 not found"));
  EXPECT_THAT(library.status().message(), HasSubstr("KVJIT_NCCL_LIBRARY names it"));
}

TEST_F(NcclLibraryTest, AMissingLibraryNamesTheFileAndWhatToInstall) {
  auto library = NcclLibrary::Load("libkvjit-no-such-nccl.so.2");
  ASSERT_FALSE(library.ok());
  EXPECT_EQ(library.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(library.status().message(), HasSubstr("libkvjit-no-such-nccl.so.2 not found"));
  EXPECT_THAT(library.status().message(), HasSubstr("pip install nvidia-nccl-cu13"));
  EXPECT_THAT(library.status().message(), HasSubstr("libnccl2"));
  EXPECT_THAT(library.status().message(), HasSubstr("KVJIT_NCCL_LIBRARY"));
}

TEST_F(NcclLibraryTest, WithoutTheVariableTheSystemLibraryIsLoadedOrNamedAsMissing) {
  ScopedNcclLibraryVariable variable("");
  auto library = NcclLibrary::LoadConfigured();
  if (library.ok()) {
    // A real NCCL: every entry point resolved, and a version of 2.14 or later.
    EXPECT_EQ((*library)->library(), "libnccl.so.2");
    EXPECT_THAT((*library)->version(), ::testing::StartsWith("2."));
    return;
  }
  EXPECT_EQ(library.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(library.status().message(), HasSubstr("libnccl.so.2 not found"));
}

TEST_F(NcclLibraryTest, ALibraryThatIsNotNcclIsRefusedNamingTheFirstMissingEntryPoint) {
  auto library = NcclLibrary::Load("libm.so.6");
  ASSERT_FALSE(library.ok());
  EXPECT_EQ(library.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(library.status().message(), HasSubstr("libm.so.6 has no ncclGetVersion"));
}

TEST_F(NcclLibraryTest, AnNcclWithoutOneEntryPointIsRefusedNamingIt) {
  auto library = NcclLibrary::Load(KVJIT_FAKE_NCCL_WITHOUT_ASYNC_ERROR);
  ASSERT_FALSE(library.ok());
  EXPECT_EQ(library.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(library.status().message(), HasSubstr("has no ncclCommGetAsyncError"));
  EXPECT_THAT(library.status().message(), HasSubstr("pip install nvidia-nccl-cu13"));
}

TEST_F(NcclLibraryTest, AnNcclOlderThanTheDeclaredApiIsRefusedWithItsVersion) {
  FakeNccl_SetVersion(21304);
  auto library = NcclLibrary::Load(KVJIT_FAKE_NCCL);
  ASSERT_FALSE(library.ok());
  EXPECT_EQ(library.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(library.status().message(), HasSubstr("is NCCL 2.13.4, older than 2.14"));
}

TEST(NcclVersionTextTest, ReadsBothOfNcclsVersionEncodings) {
  EXPECT_EQ(NcclVersionText(22803), "2.28.3");
  EXPECT_EQ(NcclVersionText(21405), "2.14.5");
  // Before 2.9: major*1000 + minor*100 + patch.
  EXPECT_EQ(NcclVersionText(2804), "2.8.4");
}

TEST(NcclResultToStatusTest, SuccessIsOk) {
  EXPECT_TRUE(NcclResultToStatus(nccl::ncclSuccess, "no error", "ncclAllReduce").ok());
}

TEST(NcclResultToStatusTest, AnErrorNamesTheCallTheCodeAndTheDescription) {
  absl::Status status =
      NcclResultToStatus(nccl::ncclRemoteError, "remote process exited", "ncclAllReduce");
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(status.message(), "ncclAllReduce failed: ncclResult_t 6 (remote process exited)");
}

TEST(NcclResultToStatusTest, CodesMapToTheStatusACallerCanActOn) {
  EXPECT_EQ(NcclResultToStatus(nccl::ncclInvalidArgument, nullptr, "c").code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(NcclResultToStatus(nccl::ncclInvalidUsage, nullptr, "c").code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(NcclResultToStatus(nccl::ncclSystemError, nullptr, "c").code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(NcclResultToStatus(nccl::ncclUnhandledCudaError, nullptr, "c").code(),
            absl::StatusCode::kInternal);
  EXPECT_EQ(NcclResultToStatus(nccl::ncclInternalError, nullptr, "c").message(),
            "c failed: ncclResult_t 3");
}

}  // namespace
}  // namespace kvjit::runtime::dist
