#ifndef KVJIT_RUNTIME_DIST_MPICOMMUNICATOR_H_
#define KVJIT_RUNTIME_DIST_MPICOMMUNICATOR_H_

#include <mpi.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "runtime/dist/Communicator.h"
#include "runtime/dist/MpiEnvironment.h"

// The collectives between the processes mpirun started, one rank each.
//
// Each collective is a non-blocking MPI call polled until it completes or
// the timeout passes, so that a rank that died or hung makes the others fail
// with DeadlineExceeded instead of hanging them (KVJIT_COLLECTIVE_TIMEOUT_S,
// CollectiveTimeout.h, sets the timeout). MPI cannot take back a collective
// it began, so after a timeout or an MPI error the communicator refuses
// every further call: the ranks are out of step for good, and the caller
// ends the job (Abort).
//
// The all-reduce does not use MPI_Allreduce, whose order of additions is
// the library's to choose: every rank gathers every rank's values and adds
// them in rank order (0, 1, ..., N-1) itself, so every rank has the same
// bits on every run.
namespace kvjit::runtime::dist {

class MpiCommunicator final : public Communicator {
 public:
  // Over every process of the job: a duplicate of MPI_COMM_WORLD (so that
  // its messages never mix with another library's), on which MPI returns
  // its errors instead of ending the process.
  static absl::StatusOr<std::unique_ptr<MpiCommunicator>> Create(const MpiEnvironment& environment,
                                                                 absl::Duration timeout);

  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;
  ~MpiCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  absl::Status AllReduceSum(absl::Span<float> values) override;
  absl::Status AllGather(absl::Span<const float> local, absl::Span<const int64_t> counts,
                         absl::Span<float> gathered) override;
  absl::Status Broadcast(absl::Span<uint8_t> bytes, int root, bool wait_forever = false) override;
  absl::Status Barrier() override;

  // Prints `message` on standard error, naming this rank, and ends every
  // process of the job (MPI_Abort): what a rank does when it fails in the
  // middle of a step, so that the others do not wait for it.
  [[noreturn]] void Abort(absl::string_view message);

 private:
  // Where the collectives' values travel: MPI reads and writes them until
  // a collective completes, which, for one abandoned at its deadline, may
  // be never, so they belong to the communicator rather than the caller.
  struct Buffers {
    std::vector<float> send;
    std::vector<float> receive;
    std::vector<uint8_t> bytes;
  };

  MpiCommunicator(MPI_Comm communicator, int rank, int size, absl::Duration timeout);

  // The error for any call once a collective has failed; OK before.
  absl::Status CheckInStep(absl::string_view operation) const;
  // OK where `code` is MPI_SUCCESS; else the communicator's failure.
  absl::Status Check(int code, absl::string_view operation);
  // Polls `request` until it completes, or until the timeout passes unless
  // `wait_forever`.
  absl::Status Await(MPI_Request& request, absl::string_view operation, bool wait_forever);
  // "rank 1", or "one of ranks 1, 2, 3": the ranks a timeout may be waiting
  // for.
  std::string OtherRanks() const;

  MPI_Comm communicator_;
  int rank_;
  int size_;
  absl::Duration timeout_;
  std::unique_ptr<Buffers> buffers_;
  // Whether a collective was left incomplete (at its deadline or an error):
  // MPI may still write into the buffers.
  bool abandoned_ = false;
  absl::Status failure_;
};

}  // namespace kvjit::runtime::dist

#endif  // KVJIT_RUNTIME_DIST_MPICOMMUNICATOR_H_
