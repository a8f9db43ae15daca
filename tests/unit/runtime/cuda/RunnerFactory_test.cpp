#include "runtime/generation/RunnerFactory.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvjit::runtime {
namespace {

using ::testing::HasSubstr;

TEST(RunnerFactoryTest, DevicesAreSpelledAsInPyTorch) {
  EXPECT_EQ(ParseRunnerDevice("cpu")->kind, RunnerDevice::Kind::kCpu);
  auto cuda = ParseRunnerDevice("cuda");
  ASSERT_TRUE(cuda.ok());
  EXPECT_EQ(cuda->kind, RunnerDevice::Kind::kCuda);
  EXPECT_EQ(cuda->ordinal, 0);
  auto second = ParseRunnerDevice("cuda:1");
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->kind, RunnerDevice::Kind::kCuda);
  EXPECT_EQ(second->ordinal, 1);
}

TEST(RunnerFactoryTest, AnUnknownDeviceIsAnErrorListingTheKnownOnes) {
  for (const char* text : {"gpu", "cuda:", "cuda:-1", "cuda:x", "CPU", ""}) {
    auto device = ParseRunnerDevice(text);
    ASSERT_FALSE(device.ok()) << text;
    EXPECT_THAT(device.status().message(), HasSubstr("use cpu, cuda or cuda:N")) << text;
  }
}

}  // namespace
}  // namespace kvjit::runtime
