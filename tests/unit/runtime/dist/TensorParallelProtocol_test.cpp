// Rank 0's TensorParallelStepRunner and the workers' RunRankWorker, as
// threads over an InProcessGroup, with fake step runners that record what
// they run.

#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/dist/InProcessCommunicator.h"
#include "runtime/dist/RankWorker.h"
#include "runtime/dist/TensorParallelRunner.h"
#include "tests/unit/runtime/dist/PrefillStep.h"

namespace kvjit::runtime::dist {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr int64_t kBlocks = 8;
constexpr int64_t kVocab = 10;
constexpr int64_t kBlockSize = 4;

// Records each step (its tokens and logits rows) and block copy; fails its
// runs from `failing_run` on (counting from 1; 0: never).
class RecordingRunner final : public StepRunner {
 public:
  RecordingRunner(std::vector<std::string>& log, int failing_run)
      : log_(log), failing_run_(failing_run) {}

  int64_t num_blocks() const override { return kBlocks; }
  int64_t vocab_size() const override { return kVocab; }
  int64_t max_tokens_per_step() const override { return 16; }
  int64_t block_size() const override { return kBlockSize; }

  absl::Status CopyBlock(int64_t source, int64_t destination) override {
    log_.push_back(absl::StrCat("copy ", source, "->", destination));
    return absl::OkStatus();
  }
  absl::StatusOr<absl::Span<const float>> Run(const StepInputs& inputs) override {
    ++runs_;
    if (runs_ == failing_run_) return absl::InternalError("the fake's step broke");
    log_.push_back(absl::StrCat("run tokens=", absl::StrJoin(inputs.tokens(), ","),
                                " rows=", absl::StrJoin(inputs.logits_rows(), ",")));
    logits_.assign(inputs.logits_rows().size() * kVocab, static_cast<float>(runs_));
    return absl::MakeConstSpan(logits_);
  }

 private:
  std::vector<std::string>& log_;
  int failing_run_;
  int runs_ = 0;
  std::vector<float> logits_;
};

const RankSetup kSetup{"/models/tp.kvx", kBlocks, 2, "cpu"};

// What one worker thread saw and did.
struct Worker {
  std::vector<std::string> log;
  RankSetup setup;
  std::vector<std::string> aborts;
  absl::Status result;
  int failing_run = 0;
  absl::Status setup_failure = absl::OkStatus();
};

// Runs `rank0(communicator)` on rank 0 and RunRankWorker on every other
// rank of a group of `ranks`, one thread each.
void RunRanks(int ranks, absl::Duration timeout, std::vector<Worker>& workers,
              const std::function<void(Communicator&)>& rank0) {
  auto group = InProcessGroup::Create(ranks, timeout);
  ASSERT_TRUE(group.ok()) << group.status();
  workers.resize(ranks);
  std::vector<std::thread> threads;
  for (int rank = 1; rank < ranks; ++rank) {
    threads.emplace_back([&, rank] {
      Worker& worker = workers[rank];
      auto factory = [&](const RankSetup& setup) -> absl::StatusOr<std::unique_ptr<StepRunner>> {
        worker.setup = setup;
        if (!worker.setup_failure.ok()) return worker.setup_failure;
        return std::make_unique<RecordingRunner>(worker.log, worker.failing_run);
      };
      auto abort_job = [&](const std::string& message) { worker.aborts.push_back(message); };
      worker.result = RunRankWorker((*group)->communicator(rank), factory, abort_job);
    });
  }
  rank0((*group)->communicator(0));
  for (std::thread& thread : threads) thread.join();
}

RankRunnerFactory RecordingFactory(std::vector<std::string>& log, int failing_run = 0) {
  return [&log, failing_run](const RankSetup&) -> absl::StatusOr<std::unique_ptr<StepRunner>> {
    return std::make_unique<RecordingRunner>(log, failing_run);
  };
}

TEST(TensorParallelProtocolTest, WorkersSeeRankZerosStepsAndCopiesInOrder) {
  std::vector<Worker> workers;
  std::vector<std::string> rank0_log;
  RunRanks(3, absl::Seconds(10), workers, [&](Communicator& communicator) {
    auto runner =
        TensorParallelStepRunner::Start(communicator, kSetup, RecordingFactory(rank0_log));
    ASSERT_TRUE(runner.ok()) << runner.status();
    auto logits = (*runner)->Run(Prefill({1, 2, 3}));
    ASSERT_TRUE(logits.ok()) << logits.status();
    EXPECT_EQ(logits->size(), static_cast<size_t>(kVocab));
    EXPECT_TRUE((*runner)->CopyBlock(0, 5).ok());
    EXPECT_TRUE((*runner)->Run(Prefill({4})).ok());
    EXPECT_TRUE((*runner)->Stop().ok());
  });
  EXPECT_THAT(rank0_log,
              ElementsAre("run tokens=1,2,3 rows=2", "copy 0->5", "run tokens=4 rows=0"));
  for (int rank = 1; rank < 3; ++rank) {
    EXPECT_TRUE(workers[rank].result.ok()) << "rank " << rank << ": " << workers[rank].result;
    EXPECT_EQ(workers[rank].log, rank0_log) << "rank " << rank;
    EXPECT_EQ(workers[rank].setup, kSetup) << "rank " << rank;
    EXPECT_THAT(workers[rank].aborts, IsEmpty());
  }
}

TEST(TensorParallelProtocolTest, DestroyingTheRunnerStopsTheWorkers) {
  std::vector<Worker> workers;
  std::vector<std::string> rank0_log;
  RunRanks(2, absl::Seconds(10), workers, [&](Communicator& communicator) {
    auto runner =
        TensorParallelStepRunner::Start(communicator, kSetup, RecordingFactory(rank0_log));
    ASSERT_TRUE(runner.ok()) << runner.status();
    EXPECT_TRUE((*runner)->Run(Prefill({7})).ok());
  });
  EXPECT_TRUE(workers[1].result.ok()) << workers[1].result;
  EXPECT_THAT(workers[1].log, ElementsAre("run tokens=7 rows=0"));
}

TEST(TensorParallelProtocolTest, StepsAndCopiesThatRankZeroRefusesAreNeverSent) {
  std::vector<Worker> workers;
  std::vector<std::string> rank0_log;
  RunRanks(2, absl::Seconds(10), workers, [&](Communicator& communicator) {
    auto runner =
        TensorParallelStepRunner::Start(communicator, kSetup, RecordingFactory(rank0_log));
    ASSERT_TRUE(runner.ok()) << runner.status();
    auto outside_vocabulary = (*runner)->Run(Prefill({1, static_cast<int32_t>(kVocab)}));
    EXPECT_EQ(outside_vocabulary.status().code(), absl::StatusCode::kOutOfRange);
    absl::Status outside_pool = (*runner)->CopyBlock(1, kBlocks);
    EXPECT_EQ(outside_pool.code(), absl::StatusCode::kOutOfRange);
    EXPECT_THAT(outside_pool.message(), HasSubstr("block 8 is outside the pool's 8 blocks"));
    // Refused commands leave the ranks in step.
    EXPECT_TRUE((*runner)->Run(Prefill({3})).ok());
  });
  EXPECT_THAT(rank0_log, ElementsAre("run tokens=3 rows=0"));
  EXPECT_EQ(workers[1].log, rank0_log);
  EXPECT_TRUE(workers[1].result.ok()) << workers[1].result;
}

TEST(TensorParallelProtocolTest, AMalformedCommandEndsTheJobNamingTheRank) {
  std::vector<Worker> workers;
  std::vector<std::string> rank0_log;
  RunRanks(2, absl::Milliseconds(500), workers, [&](Communicator& communicator) {
    auto runner =
        TensorParallelStepRunner::Start(communicator, kSetup, RecordingFactory(rank0_log));
    ASSERT_TRUE(runner.ok()) << runner.status();
    std::vector<uint8_t> garbage = {1, 99, 0, 0};
    ASSERT_TRUE(BroadcastBytes(communicator, garbage, 0).ok());
    // The runner's Stop finds no worker and gives up at the timeout.
  });
  EXPECT_EQ(workers[1].result.code(), absl::StatusCode::kInvalidArgument) << workers[1].result;
  ASSERT_THAT(workers[1].aborts, ElementsAre(HasSubstr("tensor-parallel rank 1 of 2")));
  EXPECT_THAT(workers[1].aborts[0], HasSubstr("unknown kind 99"));
  EXPECT_THAT(workers[1].log, IsEmpty());
}

TEST(TensorParallelProtocolTest, AWorkerWhoseStepFailsEndsTheJob) {
  std::vector<Worker> workers(2);
  workers[1].failing_run = 2;
  std::vector<std::string> rank0_log;
  RunRanks(2, absl::Milliseconds(500), workers, [&](Communicator& communicator) {
    auto runner =
        TensorParallelStepRunner::Start(communicator, kSetup, RecordingFactory(rank0_log));
    ASSERT_TRUE(runner.ok()) << runner.status();
    EXPECT_TRUE((*runner)->Run(Prefill({1})).ok());
    // The fakes perform no collectives, so rank 0's share succeeds alone.
    EXPECT_TRUE((*runner)->Run(Prefill({2})).ok());
  });
  EXPECT_EQ(workers[1].result.code(), absl::StatusCode::kInternal) << workers[1].result;
  ASSERT_THAT(workers[1].aborts, ElementsAre(HasSubstr("tensor-parallel rank 1 of 2")));
  EXPECT_THAT(workers[1].aborts[0],
              HasSubstr("its step (command 2) failed: the fake's step broke"));
  EXPECT_THAT(workers[1].log, ElementsAre("run tokens=1 rows=0"));
}

TEST(TensorParallelProtocolTest, AfterRankZerosStepFailsEveryCommandIsRefused) {
  std::vector<Worker> workers(2);
  workers[1].failing_run = 1;
  std::vector<std::string> rank0_log;
  RunRanks(2, absl::Seconds(10), workers, [&](Communicator& communicator) {
    auto runner =
        TensorParallelStepRunner::Start(communicator, kSetup, RecordingFactory(rank0_log, 1));
    ASSERT_TRUE(runner.ok()) << runner.status();
    EXPECT_EQ((*runner)->Run(Prefill({1})).status().code(), absl::StatusCode::kInternal);
    absl::Status after = (*runner)->CopyBlock(0, 1);
    EXPECT_EQ(after.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(after.message(), HasSubstr("out of step: the fake's step broke"));
    EXPECT_EQ((*runner)->Stop().code(), absl::StatusCode::kFailedPrecondition);
  });
  EXPECT_THAT(rank0_log, IsEmpty());
  EXPECT_THAT(workers[1].aborts, ElementsAre(HasSubstr("the fake's step broke")));
}

TEST(TensorParallelProtocolTest, ASetupThatFailsOnAWorkerFailsStartNamingTheRank) {
  std::vector<Worker> workers(3);
  workers[2].setup_failure = absl::NotFoundError("/models/tp.kvx: no such file");
  std::vector<std::string> rank0_log;
  RunRanks(3, absl::Seconds(10), workers, [&](Communicator& communicator) {
    auto runner =
        TensorParallelStepRunner::Start(communicator, kSetup, RecordingFactory(rank0_log));
    EXPECT_EQ(runner.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(runner.status().message(), HasSubstr("setup failed on rank 2 of 3"));
  });
  EXPECT_EQ(workers[2].result.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(workers[2].result.message(),
              HasSubstr("rank 2 could not set up its step runner: /models/tp.kvx: no such file"));
  EXPECT_EQ(workers[1].result.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(workers[1].result.message(), HasSubstr("setup failed on rank 2 of 3"));
  // A setup that fails ends every rank without aborting the job.
  EXPECT_THAT(workers[1].aborts, IsEmpty());
  EXPECT_THAT(workers[2].aborts, IsEmpty());
}

TEST(TensorParallelProtocolTest, StartRunsOnRankZeroAlone) {
  auto group = InProcessGroup::Create(2, absl::Seconds(1));
  ASSERT_TRUE(group.ok()) << group.status();
  std::vector<std::string> log;
  auto runner =
      TensorParallelStepRunner::Start((*group)->communicator(1), kSetup, RecordingFactory(log));
  EXPECT_EQ(runner.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(runner.status().message(), HasSubstr("this is rank 1"));
}

}  // namespace
}  // namespace kvjit::runtime::dist
