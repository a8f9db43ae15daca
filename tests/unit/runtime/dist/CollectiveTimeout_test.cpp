#include "runtime/dist/CollectiveTimeout.h"

#include <cstdlib>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvjit::runtime::dist {
namespace {

using ::testing::HasSubstr;

constexpr char kVariable[] = "KVJIT_COLLECTIVE_TIMEOUT_S";

TEST(CollectiveTimeoutTest, DefaultsToSixtySecondsWithoutTheVariable) {
  unsetenv(kVariable);
  auto timeout = CollectiveTimeoutFromEnvironment();
  ASSERT_TRUE(timeout.ok()) << timeout.status();
  EXPECT_EQ(*timeout, absl::Seconds(60));
}

TEST(CollectiveTimeoutTest, ReadsSecondsWithFractions) {
  setenv(kVariable, "2.5", 1);
  auto timeout = CollectiveTimeoutFromEnvironment();
  unsetenv(kVariable);
  ASSERT_TRUE(timeout.ok()) << timeout.status();
  EXPECT_EQ(*timeout, absl::Milliseconds(2500));
}

TEST(CollectiveTimeoutTest, RefusesWhatIsNotAPositiveNumber) {
  for (const char* text : {"0", "-1", "ten", "", "inf"}) {
    setenv(kVariable, text, 1);
    auto timeout = CollectiveTimeoutFromEnvironment();
    EXPECT_EQ(timeout.status().code(), absl::StatusCode::kInvalidArgument) << "'" << text << "'";
    EXPECT_THAT(timeout.status().message(), HasSubstr(kVariable));
  }
  unsetenv(kVariable);
}

}  // namespace
}  // namespace kvjit::runtime::dist
