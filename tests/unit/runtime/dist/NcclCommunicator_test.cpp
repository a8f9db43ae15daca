// The NCCL backend against the fake libnccl (FakeNccl.h), with ranks as
// threads of this process: rank 0's unique id reaches the others over a host
// Communicator, the collectives move real data, and failures (an
// asynchronous error, a stream that never finishes, a failed enqueue)
// abort the communicator with an error naming the rank.

#include "runtime/dist/NcclCommunicator.h"

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/runtime/dist/FakeNccl.h"

namespace kvjit::runtime::dist {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

// The state the ranks of one ThreadGroupCommunicator share.
struct HostGroup {
  explicit HostGroup(int size) : size(size) {}

  // Returns once every rank has arrived.
  void Rendezvous(std::unique_lock<std::mutex>& lock) {
    const long generation_now = generation;
    if (++arrived == size) {
      arrived = 0;
      ++generation;
      everyone_arrived.notify_all();
      return;
    }
    everyone_arrived.wait(lock, [&] { return generation != generation_now; });
  }

  const int size;
  std::mutex mutex;
  std::condition_variable everyone_arrived;
  int arrived = 0;
  long generation = 0;
  std::vector<uint8_t> payload;
};

// A host Communicator over threads, only as much of one as the NCCL
// bootstrap uses (Broadcast and Barrier), for these tests: the real
// in-process and MPI ones live elsewhere.
class ThreadGroupCommunicator : public Communicator {
 public:
  ThreadGroupCommunicator(std::shared_ptr<HostGroup> group, int rank)
      : group_(std::move(group)), rank_(rank) {}

  int rank() const override { return rank_; }
  int size() const override { return group_->size; }

  absl::Status AllReduceSum(absl::Span<float> values) override {
    return absl::UnimplementedError("the NCCL bootstrap uses only Broadcast");
  }
  absl::Status AllGather(absl::Span<const float> local, absl::Span<const int64_t> counts,
                         absl::Span<float> gathered) override {
    return absl::UnimplementedError("the NCCL bootstrap uses only Broadcast");
  }

  absl::Status Broadcast(absl::Span<uint8_t> bytes, int root, bool wait_forever) override {
    std::unique_lock<std::mutex> lock(group_->mutex);
    if (rank_ == root) group_->payload.assign(bytes.begin(), bytes.end());
    group_->Rendezvous(lock);
    if (group_->payload.size() != bytes.size()) {
      return absl::InvalidArgumentError("broadcast sizes differ between ranks");
    }
    std::copy(group_->payload.begin(), group_->payload.end(), bytes.begin());
    // No rank may overwrite the payload before every rank has read it.
    group_->Rendezvous(lock);
    return absl::OkStatus();
  }

  absl::Status Barrier() override {
    std::unique_lock<std::mutex> lock(group_->mutex);
    group_->Rendezvous(lock);
    return absl::OkStatus();
  }

 private:
  std::shared_ptr<HostGroup> group_;
  int rank_;
};

// A host Communicator whose broadcasts fail, as one past its deadline does.
class FailingBroadcastCommunicator : public ThreadGroupCommunicator {
 public:
  FailingBroadcastCommunicator() : ThreadGroupCommunicator(std::make_shared<HostGroup>(2), 1) {}
  absl::Status Broadcast(absl::Span<uint8_t> bytes, int root, bool wait_forever) override {
    return absl::DeadlineExceededError("Broadcast: rank 0 did not come within 30s");
  }
};

// Runs `body(rank)` on one thread per rank, each with its own CUDA device
// (the rank's number) current, as the runner of each process would.
void RunRanks(int size, const std::function<void(int)>& body) {
  std::vector<std::thread> threads;
  for (int rank = 0; rank < size; ++rank) {
    threads.emplace_back([rank, &body] {
      FakeNccl_SetCurrentDevice(rank);
      body(rank);
    });
  }
  for (std::thread& thread : threads) thread.join();
}

// The stream handle a runner would pass: any distinct pointer.
void* StreamOfRank(int rank) { return reinterpret_cast<void*>(0x1000 + rank); }

class NcclCommunicatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    FakeNccl_Reset();
    FakeNccl_SetCurrentDevice(0);
    auto library = NcclLibrary::Load(KVJIT_FAKE_NCCL);
    ASSERT_TRUE(library.ok()) << library.status();
    library_ = *std::move(library);
  }

  // The communicator of every rank of a group of `size`, made on their
  // threads; fails the test when any rank's Create fails.
  std::vector<std::unique_ptr<NcclCommunicator>> CreateGroup(int size) {
    auto host = std::make_shared<HostGroup>(size);
    std::vector<std::unique_ptr<NcclCommunicator>> communicators(size);
    std::vector<absl::Status> statuses(size);
    RunRanks(size, [&](int rank) {
      ThreadGroupCommunicator host_communicator(host, rank);
      auto created = NcclCommunicator::Create(host_communicator, *library_, rank);
      statuses[rank] = created.status();
      if (created.ok()) communicators[rank] = *std::move(created);
    });
    for (int rank = 0; rank < size; ++rank) {
      EXPECT_TRUE(statuses[rank].ok()) << "rank " << rank << ": " << statuses[rank];
    }
    return communicators;
  }

  std::unique_ptr<NcclLibrary> library_;
};

TEST_F(NcclCommunicatorTest, RankZerosUniqueIdReachesEveryRankOverTheHostCommunicator) {
  auto communicators = CreateGroup(2);
  ASSERT_NE(communicators[0], nullptr);
  ASSERT_NE(communicators[1], nullptr);
  // One id, made by rank 0 alone: both ranks joined the same NCCL group
  // (ncclCommInitRank returns only once every rank of the id has called it).
  EXPECT_EQ(FakeNccl_UniqueIdsMade(), 1);
  EXPECT_EQ(communicators[0]->rank(), 0);
  EXPECT_EQ(communicators[1]->rank(), 1);
  EXPECT_EQ(communicators[1]->size(), 2);
}

TEST_F(NcclCommunicatorTest, AllReduceSumsEveryRanksValuesOnTheCallersStream) {
  auto communicators = CreateGroup(2);
  ASSERT_NE(communicators[1], nullptr);
  std::vector<std::vector<float>> values = {{1.0f, 2.0f, 3.0f}, {10.0f, 20.0f, 30.0f}};
  std::vector<absl::Status> statuses(2);
  std::vector<void*> streams(2);
  RunRanks(2, [&](int rank) {
    statuses[rank] = communicators[rank]->AllReduceSum(values[rank].data(), 3, StreamOfRank(rank));
    streams[rank] = FakeNccl_LastStream();
  });
  for (int rank = 0; rank < 2; ++rank) {
    ASSERT_TRUE(statuses[rank].ok()) << statuses[rank];
    EXPECT_THAT(values[rank], ElementsAre(11.0f, 22.0f, 33.0f));
    EXPECT_EQ(streams[rank], StreamOfRank(rank));
  }
}

TEST_F(NcclCommunicatorTest, AllGatherOfUnevenShardsPadsEachToTheLargest) {
  // Shards of 2, 1 and 2 floats, each padded to 2 (the padding is -1).
  auto communicators = CreateGroup(3);
  ASSERT_NE(communicators[2], nullptr);
  std::vector<std::vector<float>> shards = {{0.0f, 1.0f}, {2.0f, -1.0f}, {3.0f, 4.0f}};
  std::vector<std::vector<float>> gathered(3, std::vector<float>(6, 99.0f));
  std::vector<absl::Status> statuses(3);
  RunRanks(3, [&](int rank) {
    statuses[rank] = communicators[rank]->AllGather(shards[rank].data(), 2, gathered[rank].data(),
                                                    StreamOfRank(rank));
  });
  for (int rank = 0; rank < 3; ++rank) {
    ASSERT_TRUE(statuses[rank].ok()) << statuses[rank];
    // Rank r's shard starts at r * 2.
    EXPECT_THAT(gathered[rank], ElementsAreArray({0.0f, 1.0f, 2.0f, -1.0f, 3.0f, 4.0f}));
  }
}

TEST_F(NcclCommunicatorTest, BroadcastCopiesTheRootsBytesToEveryRank) {
  auto communicators = CreateGroup(2);
  ASSERT_NE(communicators[1], nullptr);
  std::vector<std::vector<uint8_t>> bytes = {{0, 0, 0}, {7, 8, 9}};
  std::vector<absl::Status> statuses(2);
  RunRanks(2, [&](int rank) {
    statuses[rank] =
        communicators[rank]->Broadcast(bytes[rank].data(), 3, /*root=*/1, StreamOfRank(rank));
  });
  for (int rank = 0; rank < 2; ++rank) {
    ASSERT_TRUE(statuses[rank].ok()) << statuses[rank];
    EXPECT_THAT(bytes[rank], ElementsAre(7, 8, 9));
  }
}

TEST_F(NcclCommunicatorTest, AnAsynchronousErrorAbortsTheRanksCommunicatorAndNamesTheRank) {
  auto communicators = CreateGroup(2);
  ASSERT_NE(communicators[1], nullptr);
  EXPECT_TRUE(communicators[1]->CheckHealth().ok());
  FakeNccl_FailAsynchronously(1, nccl::ncclRemoteError);

  absl::Status health = communicators[1]->CheckHealth();
  EXPECT_EQ(health.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(health.message(), HasSubstr("NCCL rank 1 of 2 (cuda:1)"));
  EXPECT_THAT(
      health.message(),
      HasSubstr("an enqueued collective failed: ncclResult_t 6 (fake: a remote rank failed)"));
  EXPECT_THAT(health.message(), HasSubstr("aborted"));
  EXPECT_EQ(FakeNccl_CommsAborted(), 1);
  EXPECT_TRUE(communicators[0]->CheckHealth().ok());

  // Every later call returns the error, without touching NCCL again.
  float value = 1.0f;
  absl::Status after = communicators[1]->AllReduceSum(&value, 1, StreamOfRank(1));
  EXPECT_EQ(after.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(after.message(), HasSubstr("NCCL rank 1 of 2"));
  EXPECT_EQ(FakeNccl_CommsAborted(), 1);
}

TEST_F(NcclCommunicatorTest, AStreamThatNeverFinishesIsADeadlineThatAbortsTheCommunicator) {
  auto communicators = CreateGroup(1);
  ASSERT_NE(communicators[0], nullptr);
  int polls = 0;
  const absl::Time start = absl::Now();
  absl::Status waited = communicators[0]->AwaitStream(
      [&]() -> absl::StatusOr<bool> {
        ++polls;
        return false;
      },
      absl::Milliseconds(50));
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(50));
  EXPECT_EQ(waited.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(waited.message(), HasSubstr("NCCL rank 0 of 1 (cuda:0)"));
  EXPECT_THAT(waited.message(), HasSubstr("did not finish within 50ms"));
  EXPECT_GT(polls, 1);
  EXPECT_EQ(FakeNccl_CommsAborted(), 1);
}

TEST_F(NcclCommunicatorTest, AStreamThatFinishesEndsTheWaitWithoutAbort) {
  auto communicators = CreateGroup(1);
  ASSERT_NE(communicators[0], nullptr);
  int polls = 0;
  absl::Status waited = communicators[0]->AwaitStream(
      [&]() -> absl::StatusOr<bool> { return ++polls == 3; }, absl::Seconds(10));
  EXPECT_TRUE(waited.ok()) << waited;
  EXPECT_EQ(polls, 3);
  EXPECT_EQ(FakeNccl_CommsAborted(), 0);
}

TEST_F(NcclCommunicatorTest, AnAsynchronousErrorEndsAWaitBeforeItsDeadline) {
  auto communicators = CreateGroup(1);
  ASSERT_NE(communicators[0], nullptr);
  int polls = 0;
  absl::Status waited = communicators[0]->AwaitStream(
      [&]() -> absl::StatusOr<bool> {
        if (++polls == 2) FakeNccl_FailAsynchronously(0, nccl::ncclSystemError);
        return false;
      },
      absl::Seconds(60));
  EXPECT_EQ(waited.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(waited.message(), HasSubstr("NCCL rank 0 of 1"));
  EXPECT_THAT(waited.message(), HasSubstr("fake: a system call failed"));
  EXPECT_EQ(polls, 2);
  EXPECT_EQ(FakeNccl_CommsAborted(), 1);
}

TEST_F(NcclCommunicatorTest, AFailedStreamAbortsTheCommunicator) {
  auto communicators = CreateGroup(1);
  ASSERT_NE(communicators[0], nullptr);
  absl::Status waited = communicators[0]->AwaitStream(
      []() -> absl::StatusOr<bool> {
        return absl::InternalError("cuStreamQuery failed: CUDA_ERROR_ILLEGAL_ADDRESS");
      },
      absl::Seconds(10));
  EXPECT_EQ(waited.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(waited.message(), HasSubstr("NCCL rank 0 of 1"));
  EXPECT_THAT(waited.message(), HasSubstr("CUDA_ERROR_ILLEGAL_ADDRESS"));
  EXPECT_EQ(FakeNccl_CommsAborted(), 1);
}

TEST_F(NcclCommunicatorTest, AFailedEnqueueAbortsTheCommunicatorNamingTheCollective) {
  auto communicators = CreateGroup(1);
  ASSERT_NE(communicators[0], nullptr);
  FakeNccl_FailNextCollective(nccl::ncclUnhandledCudaError);
  float value = 1.0f;
  absl::Status reduced = communicators[0]->AllReduceSum(&value, 1, StreamOfRank(0));
  EXPECT_EQ(reduced.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(reduced.message(), HasSubstr("NCCL rank 0 of 1 (cuda:0): ncclAllReduce failed"));
  EXPECT_EQ(FakeNccl_CommsAborted(), 1);
}

TEST_F(NcclCommunicatorTest, BadArgumentsAreRefusedBeforeNcclWithoutAbort) {
  auto communicators = CreateGroup(1);
  ASSERT_NE(communicators[0], nullptr);
  NcclCommunicator& communicator = *communicators[0];
  float value = 0.0f;
  EXPECT_EQ(communicator.AllReduceSum(&value, -1, nullptr).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(communicator.AllGather(nullptr, 4, &value, nullptr).message(),
              HasSubstr("all-gather of 4 elements with a null buffer"));
  EXPECT_THAT(communicator.Broadcast(&value, 4, /*root=*/1, nullptr).message(),
              HasSubstr("broadcast from rank 1, outside the 1 ranks"));
  EXPECT_EQ(FakeNccl_CommsAborted(), 0);
  EXPECT_TRUE(communicator.CheckHealth().ok());
}

TEST_F(NcclCommunicatorTest, ACommunicatorOnAnotherDeviceThanAskedIsRefused) {
  // The caller asked for cuda:1 but left device 0 current on its thread.
  auto host = std::make_shared<HostGroup>(1);
  ThreadGroupCommunicator host_communicator(host, 0);
  auto created = NcclCommunicator::Create(host_communicator, *library_, /*device_ordinal=*/1);
  ASSERT_FALSE(created.ok());
  EXPECT_EQ(created.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(created.status().message(),
              HasSubstr("NCCL rank 0 of 1 (cuda:1): the NCCL communicator is on CUDA device 0"));
  EXPECT_EQ(FakeNccl_CommsDestroyed(), 1);
}

TEST_F(NcclCommunicatorTest, WhenRankZeroCannotMakeTheIdEveryRankFailsAtOnce) {
  FakeNccl_FailNextUniqueId(nccl::ncclSystemError);
  auto host = std::make_shared<HostGroup>(2);
  std::vector<absl::Status> statuses(2);
  RunRanks(2, [&](int rank) {
    ThreadGroupCommunicator host_communicator(host, rank);
    statuses[rank] = NcclCommunicator::Create(host_communicator, *library_, rank).status();
  });
  EXPECT_THAT(statuses[0].message(),
              HasSubstr("NCCL rank 0 of 2 (cuda:0): ncclGetUniqueId failed"));
  EXPECT_EQ(statuses[1].code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(statuses[1].message(),
              HasSubstr("NCCL rank 1 of 2 (cuda:1): rank 0 could not make NCCL's unique id"));
}

TEST_F(NcclCommunicatorTest, AFailedBootstrapBroadcastIsReturnedNamingTheStep) {
  FailingBroadcastCommunicator host_communicator;
  auto created = NcclCommunicator::Create(host_communicator, *library_, 1);
  ASSERT_FALSE(created.ok());
  EXPECT_EQ(created.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(created.status().message(),
              HasSubstr("NCCL rank 1 of 2 (cuda:1): broadcasting NCCL's unique id from rank 0: "
                        "Broadcast: rank 0 did not come within 30s"));
}

TEST_F(NcclCommunicatorTest, ANegativeDeviceOrdinalIsRefused) {
  auto host = std::make_shared<HostGroup>(1);
  ThreadGroupCommunicator host_communicator(host, 0);
  auto created = NcclCommunicator::Create(host_communicator, *library_, -1);
  EXPECT_EQ(created.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(NcclCommunicatorTest, DestroyingTheCommunicatorDestroysNcclsUnlessAborted) {
  {
    auto communicators = CreateGroup(1);
    ASSERT_NE(communicators[0], nullptr);
  }
  EXPECT_EQ(FakeNccl_CommsDestroyed(), 1);
  {
    auto communicators = CreateGroup(1);
    ASSERT_NE(communicators[0], nullptr);
    FakeNccl_FailAsynchronously(0, nccl::ncclRemoteError);
    EXPECT_FALSE(communicators[0]->CheckHealth().ok());
  }
  EXPECT_EQ(FakeNccl_CommsDestroyed(), 1);
  EXPECT_EQ(FakeNccl_CommsAborted(), 1);
}

// The real libnccl where this machine has one: the declared API (NcclApi.h)
// carries the bootstrap into NCCL, which either joins a one-rank
// communicator (on a GPU) or returns an error as a status (without one).
TEST(RealNcclTest, AOneRankCommunicatorIsMadeOrRefusedWithAStatus) {
  auto library = NcclLibrary::Load(kDefaultNcclLibrary);
  if (!library.ok()) GTEST_SKIP() << library.status();
  auto host = std::make_shared<HostGroup>(1);
  ThreadGroupCommunicator host_communicator(host, 0);
  auto created = NcclCommunicator::Create(host_communicator, **library, /*device_ordinal=*/0);
  if (created.ok()) {
    EXPECT_EQ((*created)->size(), 1);
    EXPECT_TRUE((*created)->CheckHealth().ok());
    return;
  }
  EXPECT_THAT(created.status().message(), HasSubstr("NCCL rank 0 of 1 (cuda:0)"));
  EXPECT_THAT(created.status().message(), HasSubstr("ncclCommInitRank failed"));
}

}  // namespace
}  // namespace kvjit::runtime::dist
