#include "runtime/generation/RequestValidation.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvjit::runtime {
namespace {

using ::testing::HasSubstr;

constexpr RequestLimits kLimits = {/*vocab_size=*/16, /*context_length=*/10};

TEST(RequestValidationTest, CutsNewTokensToWhatTheContextLeaves) {
  const std::vector<int32_t> prompt = {1, 2, 15};
  EXPECT_EQ(*ValidateRequest("request 1", prompt, 4, kLimits), 4);
  EXPECT_EQ(*ValidateRequest("request 1", prompt, 100, kLimits), 7);
  EXPECT_EQ(*ValidateRequest("request 1", std::vector<int32_t>(9, 0), 5, kLimits), 1);
}

TEST(RequestValidationTest, NamesTheRequestAndTheValue) {
  struct Case {
    std::vector<int32_t> prompt;
    int64_t max_new_tokens;
    absl::StatusCode code;
    const char* message;
  };
  const Case cases[] = {
      {{}, 4, absl::StatusCode::kInvalidArgument, "request 3: the prompt has no tokens"},
      {{1, 16}, 4, absl::StatusCode::kInvalidArgument,
       "request 3: prompt token 1 is 16, outside the vocabulary of 16"},
      {{-1}, 4, absl::StatusCode::kInvalidArgument, "prompt token 0 is -1"},
      {std::vector<int32_t>(10, 1), 4, absl::StatusCode::kOutOfRange,
       "request 3: the prompt's 10 tokens leave no room in the context of 10"},
      {{1}, 0, absl::StatusCode::kInvalidArgument,
       "request 3: max_new_tokens is 0; it must be at least 1"},
  };
  for (const Case& c : cases) {
    const absl::StatusOr<int64_t> result =
        ValidateRequest("request 3", c.prompt, c.max_new_tokens, kLimits);
    ASSERT_FALSE(result.ok()) << c.message;
    EXPECT_EQ(result.status().code(), c.code) << c.message;
    EXPECT_THAT(result.status().message(), HasSubstr(c.message));
  }
}

}  // namespace
}  // namespace kvjit::runtime
