#include "runtime/dist/InProcessCommunicator.h"

#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvjit::runtime::dist {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Runs `body(communicator)` on every rank of `group`, one thread each, and
// returns each rank's status.
std::vector<absl::Status> RunRanks(
    InProcessGroup& group, const std::function<absl::Status(InProcessCommunicator&)>& body) {
  std::vector<absl::Status> statuses(group.size());
  std::vector<std::thread> threads;
  for (int rank = 0; rank < group.size(); ++rank) {
    threads.emplace_back([&, rank] { statuses[rank] = body(group.communicator(rank)); });
  }
  for (std::thread& thread : threads) thread.join();
  return statuses;
}

void ExpectAllOk(const std::vector<absl::Status>& statuses) {
  for (size_t rank = 0; rank < statuses.size(); ++rank) {
    EXPECT_TRUE(statuses[rank].ok()) << "rank " << rank << ": " << statuses[rank];
  }
}

std::unique_ptr<InProcessGroup> MakeGroup(int ranks, absl::Duration timeout = absl::Seconds(10)) {
  auto group = InProcessGroup::Create(ranks, timeout);
  EXPECT_TRUE(group.ok()) << group.status();
  return *std::move(group);
}

// Values whose sum depends on the order of the additions: 1e8 + 1 + (-1e8)
// is 0 in f32 when added left to right, and 1 when the last two are added
// first.
std::vector<float> OrderSensitiveValues(int rank) {
  switch (rank) {
    case 0:
      return {1e8f, 0.5f, -3.0f};
    case 1:
      return {1.0f, 0.25f, 7.0f};
    default:
      return {-1e8f, 0.125f, 1.5f};
  }
}

TEST(InProcessCommunicatorTest, AllReduceSumsInRankOrderIdenticallyOnTwoRanks) {
  auto group = MakeGroup(2);
  std::vector<std::vector<float>> results(2);
  ExpectAllOk(RunRanks(*group, [&](InProcessCommunicator& communicator) {
    results[communicator.rank()] = OrderSensitiveValues(communicator.rank());
    return communicator.AllReduceSum(absl::MakeSpan(results[communicator.rank()]));
  }));
  EXPECT_THAT(results[0], ElementsAre(1e8f + 1.0f, 0.75f, 4.0f));
  EXPECT_EQ(results[0], results[1]);
}

TEST(InProcessCommunicatorTest, AllReduceSumsInRankOrderIdenticallyOnThreeRanks) {
  auto group = MakeGroup(3);
  std::vector<std::vector<float>> results(3);
  // Repeated, so that the threads arrive in different orders.
  for (int repeat = 0; repeat < 20; ++repeat) {
    ExpectAllOk(RunRanks(*group, [&](InProcessCommunicator& communicator) {
      results[communicator.rank()] = OrderSensitiveValues(communicator.rank());
      return communicator.AllReduceSum(absl::MakeSpan(results[communicator.rank()]));
    }));
    // (1e8 + 1) rounds to 1e8 in f32, so rank order gives 0, where adding
    // rank 2's -1e8 first would give 1.
    EXPECT_THAT(results[0], ElementsAre(0.0f, 0.875f, 5.5f));
    EXPECT_EQ(results[0], results[1]);
    EXPECT_EQ(results[0], results[2]);
  }
}

TEST(InProcessCommunicatorTest, AllGatherConcatenatesUnevenCountsInRankOrder) {
  auto group = MakeGroup(3);
  const std::vector<int64_t> counts = {2, 0, 3};
  std::vector<std::vector<float>> gathered(3, std::vector<float>(5, -1.0f));
  ExpectAllOk(RunRanks(*group, [&](InProcessCommunicator& communicator) {
    const int rank = communicator.rank();
    std::vector<float> local;
    for (int64_t i = 0; i < counts[rank]; ++i) local.push_back(10.0f * rank + i);
    return communicator.AllGather(local, counts, absl::MakeSpan(gathered[rank]));
  }));
  for (int rank = 0; rank < 3; ++rank) {
    EXPECT_THAT(gathered[rank], ElementsAre(0.0f, 1.0f, 20.0f, 21.0f, 22.0f)) << "rank " << rank;
  }
}

TEST(InProcessCommunicatorTest, AllGatherRefusesCountsThatDisagreeWithItsBuffers) {
  auto group = MakeGroup(2, absl::Seconds(5));
  const std::vector<int64_t> counts = {1, 1};
  const absl::Time start = absl::Now();
  std::vector<absl::Status> statuses = RunRanks(*group, [&](InProcessCommunicator& communicator) {
    std::vector<float> local(communicator.rank() == 1 ? 2 : 1, 1.0f);
    std::vector<float> gathered(2);
    return communicator.AllGather(local, counts, absl::MakeSpan(gathered));
  });
  EXPECT_EQ(statuses[1].code(), absl::StatusCode::kInvalidArgument) << statuses[1];
  EXPECT_THAT(statuses[1].message(), HasSubstr("its count says 1 floats"));
  // Rank 0 learns of it at once instead of waiting out the timeout.
  EXPECT_FALSE(statuses[0].ok());
  EXPECT_LT(absl::Now() - start, absl::Seconds(4));
}

TEST(InProcessCommunicatorTest, BroadcastCopiesTheRootsBytesToEveryRank) {
  auto group = MakeGroup(3);
  std::vector<std::vector<uint8_t>> bytes(3, std::vector<uint8_t>(4, 0));
  bytes[1] = {7, 8, 9, 10};
  ExpectAllOk(RunRanks(*group, [&](InProcessCommunicator& communicator) {
    return communicator.Broadcast(absl::MakeSpan(bytes[communicator.rank()]), /*root=*/1);
  }));
  for (int rank = 0; rank < 3; ++rank) {
    EXPECT_THAT(bytes[rank], ElementsAre(7, 8, 9, 10)) << "rank " << rank;
  }
}

TEST(InProcessCommunicatorTest, BroadcastBytesSendsTheSizeToo) {
  auto group = MakeGroup(2);
  std::vector<std::vector<uint8_t>> bytes = {{1, 2, 3, 4, 5}, {}};
  ExpectAllOk(RunRanks(*group, [&](InProcessCommunicator& communicator) {
    return BroadcastBytes(communicator, bytes[communicator.rank()], /*root=*/0);
  }));
  EXPECT_THAT(bytes[1], ElementsAre(1, 2, 3, 4, 5));
}

TEST(InProcessCommunicatorTest, BarrierHoldsEveryRankUntilTheLastArrives) {
  auto group = MakeGroup(2);
  const absl::Duration late = absl::Milliseconds(300);
  std::vector<absl::Time> left(2);
  const absl::Time start = absl::Now();
  ExpectAllOk(RunRanks(*group, [&](InProcessCommunicator& communicator) {
    if (communicator.rank() == 1) absl::SleepFor(late);
    absl::Status status = communicator.Barrier();
    left[communicator.rank()] = absl::Now();
    return status;
  }));
  EXPECT_GE(left[0] - start, late);
}

TEST(InProcessCommunicatorTest, CollectivesThatDifferAcrossRanksAreRefused) {
  auto group = MakeGroup(2);
  std::vector<absl::Status> statuses = RunRanks(*group, [&](InProcessCommunicator& communicator) {
    std::vector<float> values(communicator.rank() == 0 ? 4 : 5, 1.0f);
    return communicator.AllReduceSum(absl::MakeSpan(values));
  });
  for (const absl::Status& status : statuses) {
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_THAT(status.message(), HasSubstr("rank 0 called all_reduce of 4 floats"));
    EXPECT_THAT(status.message(), HasSubstr("rank 1 called all_reduce of 5 floats"));
  }
}

TEST(InProcessCommunicatorTest, ARankThatNeverArrivesEndsTheCollectiveAtTheDeadline) {
  const absl::Duration timeout = absl::Milliseconds(500);
  auto group = MakeGroup(3, timeout);
  std::vector<float> values(576, 1.0f);
  const absl::Time start = absl::Now();
  std::vector<absl::Status> statuses = RunRanks(*group, [&](InProcessCommunicator& communicator) {
    if (communicator.rank() == 1) return absl::OkStatus();  // never arrives
    std::vector<float> mine = values;
    return communicator.AllReduceSum(absl::MakeSpan(mine));
  });
  const absl::Duration waited = absl::Now() - start;
  EXPECT_GE(waited, timeout);
  EXPECT_LT(waited, timeout + absl::Seconds(2));
  // The first rank whose deadline passes says why; the other learns from it.
  const absl::Status& timed_out =
      statuses[0].code() == absl::StatusCode::kDeadlineExceeded ? statuses[0] : statuses[2];
  EXPECT_EQ(timed_out.code(), absl::StatusCode::kDeadlineExceeded) << timed_out;
  EXPECT_THAT(timed_out.message(), HasSubstr("all_reduce of 576 floats"));
  EXPECT_THAT(timed_out.message(), HasSubstr("rank 1 did not arrive within 500ms"));
  EXPECT_FALSE(statuses[0].ok());
  EXPECT_FALSE(statuses[2].ok());

  // The rank that comes late finds the group out of step at once.
  std::vector<float> late(576, 1.0f);
  absl::Status status = group->communicator(1).AllReduceSum(absl::MakeSpan(late));
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
  EXPECT_THAT(status.message(), HasSubstr("out of step"));
}

TEST(InProcessCommunicatorTest, BroadcastThatWaitsForeverOutlastsTheTimeout) {
  const absl::Duration timeout = absl::Milliseconds(200);
  auto group = MakeGroup(2, timeout);
  std::vector<std::vector<uint8_t>> bytes = {{42}, {0}};
  ExpectAllOk(RunRanks(*group, [&](InProcessCommunicator& communicator) {
    if (communicator.rank() == 0) absl::SleepFor(timeout * 3);
    return communicator.Broadcast(absl::MakeSpan(bytes[communicator.rank()]), 0,
                                  /*wait_forever=*/communicator.rank() == 1);
  }));
  EXPECT_THAT(bytes[1], ElementsAre(42));
}

TEST(InProcessCommunicatorTest, GroupRefusesNoRanksAndNoTimeout) {
  EXPECT_EQ(InProcessGroup::Create(0, absl::Seconds(1)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(InProcessGroup::Create(2, absl::ZeroDuration()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kvjit::runtime::dist
