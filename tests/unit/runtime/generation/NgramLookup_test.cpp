#include "runtime/generation/NgramLookup.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvjit::runtime {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

TEST(NgramLookup, ProposesWhatFollowedTheLongestSuffixSeenBefore) {
  // The suffix 7 8 9 occurred at the start: 1 2 followed it. The shorter
  // suffix 8 9 also occurred later (followed by 5), but the longest wins.
  const std::vector<int32_t> history = {7, 8, 9, 1, 2, 8, 9, 5, 6, 7, 8, 9};
  EXPECT_THAT(ProposeByNgramLookup(history, 1, 3, 2), ElementsAre(1, 2));
  // At most max_ngram long: with 2 the latest occurrence of 8 9 counts.
  EXPECT_THAT(ProposeByNgramLookup(history, 1, 2, 3), ElementsAre(5, 6, 7));
}

TEST(NgramLookup, TakesTheLatestOccurrenceAndStopsAtTheHistorysEnd) {
  const std::vector<int32_t> history = {4, 1, 4, 2, 3, 4};
  // 4 occurred at 0 and 2; the later one is followed by 2 3 4.
  EXPECT_THAT(ProposeByNgramLookup(history, 1, 1, 8), ElementsAre(2, 3, 4));
  EXPECT_THAT(ProposeByNgramLookup(history, 1, 1, 1), ElementsAre(2));
}

TEST(NgramLookup, ProposesNothingWithoutAMatchOfTheShortestLength) {
  EXPECT_THAT(ProposeByNgramLookup({1, 2, 3, 4}, 1, 3, 4), IsEmpty());
  // 3 occurred before, but only a suffix of 2 or more may propose.
  EXPECT_THAT(ProposeByNgramLookup({3, 1, 2, 3}, 2, 3, 4), IsEmpty());
  EXPECT_THAT(ProposeByNgramLookup({3, 1, 2, 3}, 1, 3, 4), ElementsAre(1, 2, 3));
  EXPECT_THAT(ProposeByNgramLookup({3, 1, 2, 3}, 1, 3, 0), IsEmpty());
  EXPECT_THAT(ProposeByNgramLookup({5}, 1, 3, 4), IsEmpty());
  EXPECT_THAT(ProposeByNgramLookup({}, 1, 3, 4), IsEmpty());
}

}  // namespace
}  // namespace kvjit::runtime
