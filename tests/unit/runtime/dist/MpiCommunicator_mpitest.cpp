// The MPI communicator between two processes: ctest runs this program under
// `mpirun -np 2` (CMakeLists.txt beside it), with KVJIT_COLLECTIVE_TIMEOUT_S
// set to 2. Every rank checks what it sees, prints each check that fails
// with its rank, and exits non-zero if any did.
//
// With `--abort`, rank 1 ends the job through Abort while rank 0 waits for
// a broadcast that never comes: the test passes when mpirun's output shows
// rank 1's message, and fails at its timeout if the job hangs instead.

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "runtime/dist/CollectiveTimeout.h"
#include "runtime/dist/MpiCommunicator.h"
#include "runtime/dist/MpiEnvironment.h"

namespace kvjit::runtime::dist {
namespace {

class Checks {
 public:
  explicit Checks(int rank) : rank_(rank) {}

  void Expect(bool condition, const std::string& what) {
    if (condition) return;
    std::fprintf(stderr, "rank %d: FAILED: %s\n", rank_, what.c_str());
    ++failures_;
  }
  bool ExpectOk(const absl::Status& status, const std::string& what) {
    Expect(status.ok(), absl::StrCat(what, ": ", status.ToString()));
    return status.ok();
  }
  int failures() const { return failures_; }

 private:
  int rank_;
  int failures_ = 0;
};

std::string Floats(const std::vector<float>& values) { return absl::StrJoin(values, ", "); }

void CheckAllReduce(MpiCommunicator& communicator, Checks& checks) {
  std::vector<float> values = communicator.rank() == 0 ? std::vector<float>{1e8f, 0.5f, -3.0f}
                                                       : std::vector<float>{1.0f, 0.25f, 7.0f};
  if (!checks.ExpectOk(communicator.AllReduceSum(absl::MakeSpan(values)), "all_reduce")) return;
  const std::vector<float> expected = {1e8f + 1.0f, 0.75f, 4.0f};
  checks.Expect(values == expected,
                absl::StrCat("all_reduce gave ", Floats(values), ", expected ", Floats(expected)));
  // Every rank's result, gathered, must be the same bits.
  std::vector<float> every_rank(values.size() * communicator.size());
  const std::vector<int64_t> counts(communicator.size(), static_cast<int64_t>(values.size()));
  if (!checks.ExpectOk(communicator.AllGather(values, counts, absl::MakeSpan(every_rank)),
                       "all_gather of the all_reduce's results")) {
    return;
  }
  checks.Expect(std::memcmp(every_rank.data(), every_rank.data() + values.size(),
                            values.size() * sizeof(float)) == 0,
                absl::StrCat("the ranks' all_reduce results differ: ", Floats(every_rank)));
}

// A prefill step's hidden states (576 × 512 floats): large messages take
// another path through MPI's transports than small ones.
void CheckLargeAllReduce(MpiCommunicator& communicator, Checks& checks) {
  std::vector<float> values(576 * 512);
  for (size_t i = 0; i < values.size(); ++i) {
    values[i] = static_cast<float>((i % 1000) * (communicator.rank() + 1));
  }
  if (!checks.ExpectOk(communicator.AllReduceSum(absl::MakeSpan(values)), "large all_reduce")) {
    return;
  }
  for (size_t i = 0; i < values.size(); ++i) {
    if (values[i] != static_cast<float>((i % 1000) * 3)) {
      checks.Expect(false, absl::StrCat("large all_reduce: element ", i, " is ", values[i]));
      return;
    }
  }
}

void CheckAllGatherUneven(MpiCommunicator& communicator, Checks& checks) {
  const std::vector<int64_t> counts = {3, 1};
  std::vector<float> local =
      communicator.rank() == 0 ? std::vector<float>{1.0f, 2.0f, 3.0f} : std::vector<float>{40.0f};
  std::vector<float> gathered(4, -1.0f);
  if (!checks.ExpectOk(communicator.AllGather(local, counts, absl::MakeSpan(gathered)),
                       "all_gather")) {
    return;
  }
  const std::vector<float> expected = {1.0f, 2.0f, 3.0f, 40.0f};
  checks.Expect(gathered == expected, absl::StrCat("all_gather gave ", Floats(gathered),
                                                   ", expected ", Floats(expected)));
}

void CheckBroadcasts(MpiCommunicator& communicator, Checks& checks) {
  std::vector<uint8_t> bytes =
      communicator.rank() == 1 ? std::vector<uint8_t>{7, 8, 9} : std::vector<uint8_t>{0, 0, 0};
  if (checks.ExpectOk(communicator.Broadcast(absl::MakeSpan(bytes), /*root=*/1), "broadcast")) {
    checks.Expect(bytes == std::vector<uint8_t>{7, 8, 9}, "broadcast from rank 1 did not arrive");
  }
  std::vector<uint8_t> sized;
  if (communicator.rank() == 0) sized = {1, 2, 3, 4, 5};
  if (checks.ExpectOk(BroadcastBytes(communicator, sized, /*root=*/0), "BroadcastBytes")) {
    checks.Expect(sized == std::vector<uint8_t>{1, 2, 3, 4, 5},
                  "BroadcastBytes from rank 0 did not arrive");
  }
  checks.ExpectOk(communicator.Barrier(), "barrier");
}

// Rank 0 comes three seconds late, past the two-second timeout, to a
// broadcast that rank 1 waits for without a deadline.
void CheckWaitForever(MpiCommunicator& communicator, Checks& checks) {
  std::vector<uint8_t> command = {communicator.rank() == 0 ? uint8_t{42} : uint8_t{0}};
  if (communicator.rank() == 0) absl::SleepFor(absl::Seconds(3));
  if (checks.ExpectOk(communicator.Broadcast(absl::MakeSpan(command), 0, /*wait_forever=*/true),
                      "broadcast that waits forever")) {
    checks.Expect(command[0] == 42, "the late broadcast did not arrive");
  }
}

// Rank 1 sleeps past the timeout before the all-reduce: rank 0's must end
// with DeadlineExceeded near the timeout, naming the collective and rank 1,
// and refuse every later call.
void CheckDeadline(MpiCommunicator& communicator, absl::Duration timeout, Checks& checks) {
  std::vector<float> values(576, 1.0f);
  if (communicator.rank() == 1) {
    absl::SleepFor(timeout + absl::Seconds(2));
    // Rank 0's half of the collective was posted, so this one completes.
    checks.ExpectOk(communicator.AllReduceSum(absl::MakeSpan(values)), "rank 1's late all_reduce");
    return;
  }
  const absl::Time start = absl::Now();
  const absl::Status status = communicator.AllReduceSum(absl::MakeSpan(values));
  const absl::Duration waited = absl::Now() - start;
  checks.Expect(status.code() == absl::StatusCode::kDeadlineExceeded,
                absl::StrCat("a rank that never came gave ", status.ToString(),
                             ", expected DeadlineExceeded"));
  const std::string message(status.message());
  checks.Expect(
      message.find("all_reduce of 576 floats") != std::string::npos &&
          message.find("rank 1 may have died or hung") != std::string::npos,
      absl::StrCat("the timeout's message does not name the collective and rank 1: ", message));
  checks.Expect(waited >= timeout && waited < timeout + absl::Seconds(1),
                absl::StrCat("the all_reduce gave up after ", absl::FormatDuration(waited),
                             " with a timeout of ", absl::FormatDuration(timeout)));
  const absl::Status after = communicator.Barrier();
  checks.Expect(after.code() == absl::StatusCode::kFailedPrecondition,
                absl::StrCat("a collective after a timeout gave ", after.ToString(),
                             ", expected FailedPrecondition"));
}

int RunChecks(bool abort_mode) {
  auto environment = MpiEnvironment::Initialize();
  if (!environment.ok()) {
    std::fprintf(stderr, "FAILED: %s\n", environment.status().ToString().c_str());
    return 1;
  }
  Checks checks((*environment)->rank());
  checks.Expect(MpiEnvironment::LaunchedByMpi(), "LaunchedByMpi() is false under mpirun");
  checks.Expect((*environment)->size() == 2,
                absl::StrCat("run with 2 ranks (mpirun -np 2), not ", (*environment)->size()));
  auto timeout = CollectiveTimeoutFromEnvironment();
  checks.ExpectOk(timeout.status(), "CollectiveTimeoutFromEnvironment");
  if (checks.failures() > 0) return 1;
  checks.Expect(*timeout == absl::Seconds(2),
                absl::StrCat("KVJIT_COLLECTIVE_TIMEOUT_S=2 gave ", absl::FormatDuration(*timeout)));

  auto communicator = MpiCommunicator::Create(**environment, *timeout);
  if (!checks.ExpectOk(communicator.status(), "MpiCommunicator::Create")) return 1;
  if (abort_mode) {
    if ((*communicator)->rank() == 1) (*communicator)->Abort("the test's abort");
    // Ends in an error once MPI sees rank 1 gone, or never: the job ends
    // either way.
    std::vector<uint8_t> never(1);
    const absl::Status status =
        (*communicator)->Broadcast(absl::MakeSpan(never), 0, /*wait_forever=*/true);
    std::fprintf(stderr, "rank 0: the broadcast ended: %s\n", status.ToString().c_str());
    return 1;
  }
  CheckAllReduce(**communicator, checks);
  CheckLargeAllReduce(**communicator, checks);
  CheckAllGatherUneven(**communicator, checks);
  CheckBroadcasts(**communicator, checks);
  CheckWaitForever(**communicator, checks);
  CheckDeadline(**communicator, *timeout, checks);
  const int rank = (*communicator)->rank();
  communicator->reset();
  std::printf("rank %d: %s\n", rank, checks.failures() == 0 ? "all checks passed" : "FAILED");
  return checks.failures() == 0 ? 0 : 1;
}

}  // namespace
}  // namespace kvjit::runtime::dist

int main(int argc, char** argv) {
  const bool abort_mode = argc == 2 && std::strcmp(argv[1], "--abort") == 0;
  return kvjit::runtime::dist::RunChecks(abort_mode);
}
