#include "runtime/cuda/ModuleImage.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvjit::cuda {
namespace {

using ::testing::HasSubstr;

TEST(ModuleImageTest, TheCubinServesItsOwnArchitecture) {
  EXPECT_EQ(*ChooseModuleImage(90, 90, 90), ModuleImage::kCubin);
  EXPECT_EQ(*ChooseModuleImage(90, 90, 0), ModuleImage::kCubin);
}

TEST(ModuleImageTest, OtherArchitecturesJitThePtx) {
  EXPECT_EQ(*ChooseModuleImage(100, 90, 90), ModuleImage::kPtx);
  EXPECT_EQ(*ChooseModuleImage(89, 90, 80), ModuleImage::kPtx);
  EXPECT_EQ(*ChooseModuleImage(80, 0, 80), ModuleImage::kPtx);
}

TEST(ModuleImageTest, NeitherImageFittingNamesAllArchitectures) {
  auto image = ChooseModuleImage(80, 90, 90);
  ASSERT_FALSE(image.ok());
  EXPECT_EQ(image.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(image.status().message(), HasSubstr("sm_80"));
  EXPECT_THAT(image.status().message(), HasSubstr("cubin is for sm_90"));
  EXPECT_THAT(image.status().message(), HasSubstr("PTX for compute_90"));
  EXPECT_THAT(image.status().message(), HasSubstr("--sm 80"));
}

TEST(ModuleImageTest, AMissingImageIsNamedAsNone) {
  auto image = ChooseModuleImage(80, 90, 0);
  ASSERT_FALSE(image.ok());
  EXPECT_THAT(image.status().message(), HasSubstr("PTX for none"));
}

}  // namespace
}  // namespace kvjit::cuda
