#include "runtime/sampling/StopChecker.h"

#include <random>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvjit::sampling {
namespace {

using ::testing::HasSubstr;

constexpr int32_t kEos = 2;
constexpr int32_t kEndOfTurn = 107;
constexpr int32_t kText = 500;

StopChecker MakeChecker(StopConditions conditions) {
  absl::StatusOr<StopChecker> checker = StopChecker::Create(std::move(conditions));
  EXPECT_TRUE(checker.ok()) << checker.status();
  return *std::move(checker);
}

StopConditions StopStrings(std::vector<std::string> stop_strings) {
  StopConditions conditions;
  conditions.stop_strings = std::move(stop_strings);
  return conditions;
}

struct Streamed {
  std::vector<std::string> pieces;
  StopReason reason = StopReason::kNone;
  std::string Text() const {
    std::string text;
    for (const std::string& piece : pieces) text += piece;
    return text;
  }
};

// Feeds text pieces as tokens until the checker stops.
Streamed Stream(StopChecker& checker, const std::vector<std::string>& token_texts) {
  Streamed streamed;
  for (const std::string& token_text : token_texts) {
    StopDecision decision = checker.Append(kText, token_text);
    streamed.pieces.push_back(decision.text_to_emit);
    if (decision.stop) {
      streamed.reason = decision.reason;
      break;
    }
  }
  return streamed;
}

TEST(StopCheckerTest, ReasonNames) {
  EXPECT_EQ(StopReasonName(StopReason::kEos), "eos");
  EXPECT_EQ(StopReasonName(StopReason::kStopString), "stop_string");
  EXPECT_EQ(StopReasonName(StopReason::kLength), "length");
  EXPECT_EQ(StopReasonName(StopReason::kNone), "");
}

TEST(StopCheckerTest, CreateRejectsEmptyStopStringsAndNoTokens) {
  absl::Status empty = StopChecker::Create(StopStrings({"stop", ""})).status();
  EXPECT_EQ(empty.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(empty.message(), HasSubstr("stop string 1 is empty"));
  StopConditions no_tokens;
  no_tokens.max_tokens = 0;
  EXPECT_THAT(StopChecker::Create(no_tokens).status().message(), HasSubstr("max_tokens = 0"));
}

TEST(StopCheckerTest, WithoutConditionsEverythingIsEmittedAtOnce) {
  StopChecker checker = MakeChecker({});
  Streamed streamed = Stream(checker, {"Hello", ",", " world"});
  EXPECT_THAT(streamed.pieces, ::testing::ElementsAre("Hello", ",", " world"));
  EXPECT_EQ(streamed.reason, StopReason::kNone);
  EXPECT_EQ(checker.num_tokens(), 3);
}

TEST(StopCheckerTest, EndOfGenerationTokensStopWithoutTheirText) {
  StopConditions conditions;
  conditions.stop_token_ids = {kEos, kEndOfTurn};
  StopChecker checker = MakeChecker(conditions);
  EXPECT_FALSE(checker.Append(kText, "Hi").stop);
  StopDecision decision = checker.Append(kEndOfTurn, "<end_of_turn>");
  EXPECT_TRUE(decision.stop);
  EXPECT_EQ(decision.reason, StopReason::kEos);
  EXPECT_EQ(decision.text_to_emit, "");
  EXPECT_TRUE(checker.stopped());
}

TEST(StopCheckerTest, StopStringInsideOneTokenCutsTheText) {
  StopChecker checker = MakeChecker(StopStrings({"###"}));
  StopDecision decision = checker.Append(kText, "Hello###world");
  EXPECT_TRUE(decision.stop);
  EXPECT_EQ(decision.reason, StopReason::kStopString);
  EXPECT_EQ(decision.text_to_emit, "Hello");
}

TEST(StopCheckerTest, StopStringSplitAcrossTokensIsFound) {
  StopChecker checker = MakeChecker(StopStrings({"###"}));
  Streamed streamed = Stream(checker, {"Hel", "lo #", "#", "# more", "never seen"});
  EXPECT_THAT(streamed.pieces, ::testing::ElementsAre("Hel", "lo ", "", ""));
  EXPECT_EQ(streamed.reason, StopReason::kStopString);
  EXPECT_EQ(checker.num_tokens(), 4);
}

TEST(StopCheckerTest, HeldTextIsReleasedOnceItCannotStartAStopString) {
  StopChecker checker = MakeChecker(StopStrings({"</s>"}));
  EXPECT_EQ(checker.Append(kText, "a<").text_to_emit, "a");
  EXPECT_EQ(checker.Append(kText, "/").text_to_emit, "");
  EXPECT_EQ(checker.Append(kText, "b").text_to_emit, "</b");
  EXPECT_FALSE(checker.stopped());
}

TEST(StopCheckerTest, OverlappingFalseStartsEmitOnlyWhatCannotMatch) {
  // "aab" inside "aaab": after "aaa", only the first "a" is safe to emit.
  StopChecker checker = MakeChecker(StopStrings({"aab"}));
  Streamed streamed = Stream(checker, {"a", "a", "a", "b"});
  EXPECT_THAT(streamed.pieces, ::testing::ElementsAre("", "", "a", ""));
  EXPECT_EQ(streamed.reason, StopReason::kStopString);
}

TEST(StopCheckerTest, EarliestStopStringWins) {
  StopChecker checker = MakeChecker(StopStrings({"world", "lo"}));
  StopDecision decision = checker.Append(kText, "hello world");
  EXPECT_EQ(decision.text_to_emit, "hel");
}

TEST(StopCheckerTest, MultibyteStopStringAcrossTokens) {
  StopChecker checker = MakeChecker(StopStrings({"世界"}));
  Streamed streamed = Stream(checker, {"你好世", "界!"});
  EXPECT_EQ(streamed.Text(), "你好");
  EXPECT_EQ(streamed.reason, StopReason::kStopString);
}

TEST(StopCheckerTest, MaxTokensStopsWithTheHeldText) {
  StopConditions conditions = StopStrings({"STOP"});
  conditions.max_tokens = 3;
  StopChecker checker = MakeChecker(conditions);
  Streamed streamed = Stream(checker, {"one ", "two ", "ST", "OP"});
  EXPECT_THAT(streamed.pieces, ::testing::ElementsAre("one ", "two ", "ST"));
  EXPECT_EQ(streamed.reason, StopReason::kLength);
}

TEST(StopCheckerTest, StopStringInTheLastAllowedTokenWinsOverLength) {
  StopConditions conditions = StopStrings({"STOP"});
  conditions.max_tokens = 2;
  StopChecker checker = MakeChecker(conditions);
  Streamed streamed = Stream(checker, {"one ", "STOP!"});
  EXPECT_EQ(streamed.Text(), "one ");
  EXPECT_EQ(streamed.reason, StopReason::kStopString);
}

TEST(StopCheckerTest, EosOnTheLastAllowedTokenReportsEosAndFlushes) {
  StopConditions conditions = StopStrings({"<|"});
  conditions.stop_token_ids = {kEos};
  conditions.max_tokens = 2;
  StopChecker checker = MakeChecker(conditions);
  EXPECT_EQ(checker.Append(kText, "x<").text_to_emit, "x");
  StopDecision decision = checker.Append(kEos, "");
  EXPECT_EQ(decision.reason, StopReason::kEos);
  EXPECT_EQ(decision.text_to_emit, "<");
}

TEST(StopCheckerTest, AfterStoppingNothingMoreIsEmitted) {
  StopChecker checker = MakeChecker(StopStrings({"."}));
  ASSERT_TRUE(checker.Append(kText, "end.").stop);
  StopDecision again = checker.Append(kText, "more");
  EXPECT_TRUE(again.stop);
  EXPECT_EQ(again.reason, StopReason::kStopString);
  EXPECT_EQ(again.text_to_emit, "");
  EXPECT_EQ(checker.num_tokens(), 1);
}

TEST(StopCheckerTest, TakeHeldTextReleasesAPendingPrefix) {
  StopChecker checker = MakeChecker(StopStrings({"\n\nUser:"}));
  EXPECT_EQ(checker.Append(kText, "Answer.\n\nUs").text_to_emit, "Answer.");
  EXPECT_EQ(checker.TakeHeldText(), "\n\nUs");
  EXPECT_EQ(checker.TakeHeldText(), "");
}

// Any split of a text into tokens emits the same text: everything before the
// first stop string, and at every step a prefix of it.
TEST(StopCheckerTest, EveryTokenSplitEmitsTheTextBeforeTheFirstStop) {
  const std::string text = "abcab<|im_end|>xy<|im_start|>abc<|end|>";
  const std::vector<std::string> stop_strings = {"<|end|>", "<|im_start|>", "cab<"};
  const std::string expected = "ab";  // "cab<" starts at 2
  const std::vector<std::string> other_stops = {"<|end|>", "<|im_start|>"};
  const std::string expected_without_cab = "abcab<|im_end|>xy";
  std::mt19937_64 random(3);
  for (int trial = 0; trial < 500; ++trial) {
    std::vector<std::string> tokens;
    for (size_t start = 0; start < text.size();) {
      const size_t length = 1 + random() % 5;
      tokens.push_back(text.substr(start, length));
      start += length;
    }
    for (const auto& [stops, want] :
         {std::make_pair(stop_strings, expected), std::make_pair(other_stops, expected_without_cab)}) {
      StopChecker checker = MakeChecker(StopStrings(stops));
      std::string emitted;
      for (const std::string& token : tokens) {
        StopDecision decision = checker.Append(kText, token);
        emitted += decision.text_to_emit;
        ASSERT_EQ(want.compare(0, emitted.size(), emitted), 0) << emitted;
        if (decision.stop) break;
      }
      EXPECT_EQ(emitted, want);
      EXPECT_TRUE(checker.stopped());
    }
  }
}

}  // namespace
}  // namespace kvjit::sampling
