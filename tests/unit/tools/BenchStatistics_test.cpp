#include "tools/kvjit/BenchStatistics.h"

#include "gtest/gtest.h"

namespace kvjit::cli {
namespace {

TEST(BenchStatisticsTest, TheMedianOfAnOddCountIsItsMiddleValue) {
  const Spread spread = SpreadOf({5, 1, 9, 3, 7}, /*integral=*/false);
  EXPECT_EQ(spread.median, 5);
  EXPECT_EQ(spread.min, 1);
  EXPECT_EQ(spread.max, 9);
  EXPECT_EQ(spread.runs, 5);
}

TEST(BenchStatisticsTest, TheMedianOfAnEvenCountIsTheMeanOfTheMiddleTwo) {
  EXPECT_EQ(SpreadOf({4, 1, 3, 100}, false).median, 3.5);
}

TEST(BenchStatisticsTest, NoValuesGiveNoRuns) {
  const Spread spread = SpreadOf({}, false);
  EXPECT_EQ(spread.runs, 0);
  EXPECT_EQ(FormatSpread(spread, 2), "-");
}

TEST(BenchStatisticsTest, FormatShowsTheRangeOnlyWhereRunsDiffer) {
  EXPECT_EQ(FormatSpread(SpreadOf({410.04, 398.0, 420.1}, false), 1), "410.0 (398.0-420.1)");
  EXPECT_EQ(FormatSpread(SpreadOf({2.5, 2.5}, false), 2), "2.50");
  EXPECT_EQ(FormatSpread(SpreadOf({29, 29, 29}, true), 2), "29");
  EXPECT_EQ(FormatSpread(SpreadOf({3, 4}, true), 2), "3.5 (3.0-4.0)");
}

TEST(BenchStatisticsTest, RunsAreSummarizedPerNumericField) {
  const std::vector<nlohmann::json> runs = {
      {{"engine", "kvjit"}, {"tokens_per_s", 100.0}, {"steps", 7}, {"cached", true}},
      {{"engine", "kvjit"}, {"tokens_per_s", 300.0}, {"steps", 7}, {"extra", 1.5}},
      {{"engine", "kvjit"}, {"tokens_per_s", 200.0}, {"steps", 7}}};
  const auto summary = SummarizeRuns(runs);
  EXPECT_EQ(summary.size(), 3u);  // strings and booleans are not figures
  const Spread rate = Lookup(summary, "tokens_per_s");
  EXPECT_EQ(rate.median, 200);
  EXPECT_FALSE(rate.integral);
  EXPECT_EQ(SpreadToJson(rate),
            (nlohmann::json{{"median", 200.0}, {"min", 100.0}, {"max", 300.0}, {"runs", 3}}));
  EXPECT_TRUE(Lookup(summary, "steps").integral);
  // A field only some runs have is summarized over those.
  EXPECT_EQ(Lookup(summary, "extra").runs, 1);
  EXPECT_EQ(Lookup(summary, "absent").runs, 0);
}

}  // namespace
}  // namespace kvjit::cli
