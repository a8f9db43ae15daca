#include "runtime/dist/MpiCommunicator.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <numeric>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/core/StatusMacros.h"
#include "runtime/dist/MpiError.h"

namespace kvjit::runtime::dist {
namespace {

// How long a wait polls without pausing (a collective between the layers of
// one step usually completes within it), and the longest pause between two
// polls after that (what an idle worker waiting for the next command
// costs: a thousand polls a second).
constexpr absl::Duration kSpinTime = absl::Milliseconds(1);
constexpr absl::Duration kLongestPause = absl::Milliseconds(1);

constexpr int64_t kLargestCount = std::numeric_limits<int>::max();

}  // namespace

absl::StatusOr<std::unique_ptr<MpiCommunicator>> MpiCommunicator::Create(
    const MpiEnvironment& environment, absl::Duration timeout) {
  if (timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the MPI collectives' timeout must be positive, not ", absl::FormatDuration(timeout)));
  }
  MPI_Comm communicator = MPI_COMM_NULL;
  KVJIT_RETURN_IF_ERROR(
      MpiStatus(MPI_Comm_dup(MPI_COMM_WORLD, &communicator), "MPI_Comm_dup of MPI_COMM_WORLD"));
  absl::Status handler = MpiStatus(MPI_Comm_set_errhandler(communicator, MPI_ERRORS_RETURN),
                                   "MPI_Comm_set_errhandler(MPI_ERRORS_RETURN)");
  if (!handler.ok()) {
    MPI_Comm_free(&communicator);
    return handler;
  }
  return std::unique_ptr<MpiCommunicator>(
      new MpiCommunicator(communicator, environment.rank(), environment.size(), timeout));
}

MpiCommunicator::MpiCommunicator(MPI_Comm communicator, int rank, int size, absl::Duration timeout)
    : communicator_(communicator),
      rank_(rank),
      size_(size),
      timeout_(timeout),
      buffers_(std::make_unique<Buffers>()) {}

MpiCommunicator::~MpiCommunicator() {
  // MPI may still write into an abandoned collective's buffers until the
  // process ends, so they are left allocated on purpose.
  if (abandoned_) buffers_.release();
  // A communicator freed with a collective outstanding is freed once it
  // completes (MPI_Comm_free's contract).
  MPI_Comm_free(&communicator_);
}

absl::Status MpiCommunicator::CheckInStep(absl::string_view operation) const {
  if (failure_.ok()) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      operation, " on rank ", rank_,
      ": an earlier collective failed, and the ranks are out of step: ", failure_.message()));
}

absl::Status MpiCommunicator::Check(int code, absl::string_view operation) {
  absl::Status status = MpiStatus(code, absl::StrCat(operation, " on rank ", rank_));
  if (!status.ok()) {
    abandoned_ = true;
    failure_ = status;
  }
  return status;
}

std::string MpiCommunicator::OtherRanks() const {
  std::vector<int> others;
  for (int other = 0; other < size_; ++other) {
    if (other != rank_) others.push_back(other);
  }
  if (others.size() == 1) return absl::StrCat("rank ", others[0]);
  return absl::StrCat("one of ranks ", absl::StrJoin(others, ", "));
}

absl::Status MpiCommunicator::Await(MPI_Request& request, absl::string_view operation,
                                    bool wait_forever) {
  const absl::Time start = absl::Now();
  absl::Duration pause = absl::Microseconds(10);
  while (true) {
    int done = 0;
    KVJIT_RETURN_IF_ERROR(Check(MPI_Test(&request, &done, MPI_STATUS_IGNORE), operation));
    if (done) return absl::OkStatus();
    const absl::Duration waited = absl::Now() - start;
    if (!wait_forever && waited >= timeout_) {
      abandoned_ = true;
      failure_ = absl::DeadlineExceededError(absl::StrCat(
          operation, " on rank ", rank_, " of ", size_, ": not every rank arrived within ",
          absl::FormatDuration(timeout_), "; ", OtherRanks(),
          " may have died or hung (its output says which; KVJIT_COLLECTIVE_TIMEOUT_S sets "
          "the wait)"));
      return failure_;
    }
    if (waited < kSpinTime) {
      std::this_thread::yield();
    } else {
      absl::SleepFor(pause);
      pause = std::min(pause * 2, kLongestPause);
    }
  }
}

absl::Status MpiCommunicator::AllReduceSum(absl::Span<float> values) {
  const std::string operation = absl::StrCat("all_reduce of ", values.size(), " floats");
  KVJIT_RETURN_IF_ERROR(CheckInStep(operation));
  if (static_cast<int64_t>(values.size()) > kLargestCount / size_) {
    return absl::InvalidArgumentError(absl::StrCat(operation, ": more than MPI's ", kLargestCount,
                                                   " elements once gathered from ", size_,
                                                   " ranks"));
  }
  const int count = static_cast<int>(values.size());
  buffers_->send.assign(values.begin(), values.end());
  buffers_->receive.resize(values.size() * size_);
  MPI_Request request = MPI_REQUEST_NULL;
  KVJIT_RETURN_IF_ERROR(
      Check(MPI_Iallgather(buffers_->send.data(), count, MPI_FLOAT, buffers_->receive.data(), count,
                           MPI_FLOAT, communicator_, &request),
            operation));
  KVJIT_RETURN_IF_ERROR(Await(request, operation, false));
  // Rank 0's values, then rank 1's added, and so on: the same additions in
  // the same order on every rank.
  const float* gathered = buffers_->receive.data();
  for (size_t i = 0; i < values.size(); ++i) {
    float sum = gathered[i];
    for (int rank = 1; rank < size_; ++rank) sum += gathered[rank * values.size() + i];
    values[i] = sum;
  }
  return absl::OkStatus();
}

absl::Status MpiCommunicator::AllGather(absl::Span<const float> local,
                                        absl::Span<const int64_t> counts,
                                        absl::Span<float> gathered) {
  const std::string operation = absl::StrCat("all_gather of ", local.size(), " floats");
  KVJIT_RETURN_IF_ERROR(CheckInStep(operation));
  if (counts.size() != static_cast<size_t>(size_)) {
    return absl::InvalidArgumentError(absl::StrCat(operation, " on rank ", rank_, ": ",
                                                   counts.size(), " counts for ", size_, " ranks"));
  }
  if (counts[rank_] != static_cast<int64_t>(local.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat(operation, " on rank ", rank_, ": its count says ", counts[rank_], " floats"));
  }
  std::vector<int> receive_counts(size_);
  std::vector<int> offsets(size_);
  int64_t total = 0;
  for (int rank = 0; rank < size_; ++rank) {
    if (counts[rank] < 0 || total + counts[rank] > kLargestCount) {
      return absl::InvalidArgumentError(
          absl::StrCat(operation, " on rank ", rank_, ": rank ", rank, "'s count ", counts[rank],
                       " is negative or takes the total past MPI's ", kLargestCount, " elements"));
    }
    receive_counts[rank] = static_cast<int>(counts[rank]);
    offsets[rank] = static_cast<int>(total);
    total += counts[rank];
  }
  if (total != static_cast<int64_t>(gathered.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat(operation, " on rank ", rank_, ": the counts sum to ", total,
                     " floats, and the output holds ", gathered.size()));
  }
  buffers_->send.assign(local.begin(), local.end());
  buffers_->receive.resize(gathered.size());
  MPI_Request request = MPI_REQUEST_NULL;
  KVJIT_RETURN_IF_ERROR(
      Check(MPI_Iallgatherv(buffers_->send.data(), static_cast<int>(local.size()), MPI_FLOAT,
                            buffers_->receive.data(), receive_counts.data(), offsets.data(),
                            MPI_FLOAT, communicator_, &request),
            operation));
  KVJIT_RETURN_IF_ERROR(Await(request, operation, false));
  std::copy(buffers_->receive.begin(), buffers_->receive.end(), gathered.begin());
  return absl::OkStatus();
}

absl::Status MpiCommunicator::Broadcast(absl::Span<uint8_t> bytes, int root, bool wait_forever) {
  const std::string operation =
      absl::StrCat("broadcast of ", bytes.size(), " bytes from rank ", root);
  KVJIT_RETURN_IF_ERROR(CheckInStep(operation));
  if (root < 0 || root >= size_) {
    return absl::InvalidArgumentError(
        absl::StrCat(operation, ": the root is not one of the ", size_, " ranks"));
  }
  if (static_cast<int64_t>(bytes.size()) > kLargestCount) {
    return absl::InvalidArgumentError(
        absl::StrCat(operation, ": more than MPI's ", kLargestCount, " elements"));
  }
  buffers_->bytes.assign(bytes.begin(), bytes.end());
  MPI_Request request = MPI_REQUEST_NULL;
  KVJIT_RETURN_IF_ERROR(Check(MPI_Ibcast(buffers_->bytes.data(), static_cast<int>(bytes.size()),
                                         MPI_BYTE, root, communicator_, &request),
                              operation));
  KVJIT_RETURN_IF_ERROR(Await(request, operation, wait_forever));
  std::copy(buffers_->bytes.begin(), buffers_->bytes.end(), bytes.begin());
  return absl::OkStatus();
}

absl::Status MpiCommunicator::Barrier() {
  KVJIT_RETURN_IF_ERROR(CheckInStep("barrier"));
  MPI_Request request = MPI_REQUEST_NULL;
  KVJIT_RETURN_IF_ERROR(Check(MPI_Ibarrier(communicator_, &request), "barrier"));
  return Await(request, "barrier", false);
}

void MpiCommunicator::Abort(absl::string_view message) {
  std::fprintf(stderr, "kvjit: rank %d of %d ends the job: %.*s\n", rank_, size_,
               static_cast<int>(message.size()), message.data());
  std::fflush(stderr);
  MPI_Abort(communicator_, 1);
  // MPI_Abort does not return; should a library's ever do, this process
  // still ends.
  std::_Exit(1);
}

}  // namespace kvjit::runtime::dist
