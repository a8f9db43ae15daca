#include "runtime/core/BuildInfo.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/core/BuildConfig.h"

namespace kvjit {
namespace {

using ::testing::HasSubstr;

TEST(BuildInfoTest, CpuBackendIsAlwaysFirst) {
  std::vector<BackendInfo> backends = CompiledBackends();
  ASSERT_FALSE(backends.empty());
  EXPECT_EQ(backends.front().name, "cpu");
}

TEST(BuildInfoTest, CudaBackendListedExactlyWhenBuilt) {
  bool listed = false;
  for (const BackendInfo& backend : CompiledBackends()) {
    if (backend.name == "cuda") {
      listed = true;
      EXPECT_THAT(backend.detail, HasSubstr("NVRTC "));
    }
  }
  EXPECT_EQ(listed, KVJIT_HAVE_CUDA == 1);
}

TEST(BuildInfoTest, DescriptionNamesVersionAndBackends) {
  std::string description = DescribeBuild();
  EXPECT_THAT(description, HasSubstr(std::string("kvjit ") + KVJIT_VERSION_STRING));
  EXPECT_THAT(description, HasSubstr("cpu ("));
}

}  // namespace
}  // namespace kvjit
