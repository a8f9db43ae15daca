#ifndef KVJIT_RUNTIME_DIST_INPROCESSCOMMUNICATOR_H_
#define KVJIT_RUNTIME_DIST_INPROCESSCOMMUNICATOR_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "runtime/dist/Communicator.h"

// Tensor parallelism's ranks as threads of one process: the compiler's
// equivalence check runs every rank's program this way, and the tests drive
// the step protocol with it. Each rank's communicator is used by one thread.
//
// The results do not depend on which thread comes first: every rank hands
// in a copy of its values, waits until all have, and then computes the
// result from the copies alone, the sums in rank order (0, 1, ..., N-1), so
// that every rank gets the same bits on every run.
namespace kvjit::runtime::dist {

class InProcessGroup;

class InProcessCommunicator final : public Communicator {
 public:
  int rank() const override { return rank_; }
  int size() const override;

  absl::Status AllReduceSum(absl::Span<float> values) override;
  absl::Status AllGather(absl::Span<const float> local, absl::Span<const int64_t> counts,
                         absl::Span<float> gathered) override;
  absl::Status Broadcast(absl::Span<uint8_t> bytes, int root, bool wait_forever = false) override;
  absl::Status Barrier() override;

 private:
  friend class InProcessGroup;
  InProcessCommunicator(InProcessGroup& group, int rank) : group_(group), rank_(rank) {}

  InProcessGroup& group_;
  int rank_;
};

// The rendezvous of N ranks: hands out one communicator per rank, which
// must not outlive the group.
class InProcessGroup {
 public:
  // `timeout` bounds how long a rank waits at a collective for the others.
  static absl::StatusOr<std::unique_ptr<InProcessGroup>> Create(int ranks, absl::Duration timeout);

  int size() const { return static_cast<int>(communicators_.size()); }
  absl::Duration timeout() const { return timeout_; }
  InProcessCommunicator& communicator(int rank) { return *communicators_[rank]; }

  // Ends every collective, waiting or to come, with `status`: after a rank
  // failed, the ranks are out of step for good (a worker waiting, without a
  // deadline, for rank 0's next command among them).
  void Abort(const absl::Status& status);

 private:
  friend class InProcessCommunicator;

  // What one rank handed in to one collective.
  struct Contribution {
    std::string operation;  // as the error messages name it: "all_reduce of 576 floats"
    int64_t elements = 0;   // the size every rank must agree on
    int root = 0;           // a broadcast's
    std::vector<uint8_t> bytes;
  };

  InProcessGroup(int ranks, absl::Duration timeout);

  // Hands in `rank`'s contribution to its next collective and waits until
  // every rank has handed in theirs to that collective (without a deadline
  // where `wait_forever`); returns every rank's, in rank order, which stay
  // valid until this rank's next collective.
  absl::StatusOr<std::vector<const Contribution*>> Exchange(int rank, Contribution contribution,
                                                            bool wait_forever);
  // Whether every rank handed in the same operation and size; the error
  // names the first rank that did not.
  static absl::Status CheckAgreement(const std::vector<const Contribution*>& contributions);

  absl::Duration timeout_;
  std::vector<std::unique_ptr<InProcessCommunicator>> communicators_;

  absl::Mutex mutex_;
  // How many collectives each rank has begun.
  std::vector<int64_t> begun_ ABSL_GUARDED_BY(mutex_);
  // Two rounds of contributions, by the parity of the collective's number: a
  // rank begins collective k + 2 only after every rank began k + 1, and so
  // finished reading k's.
  std::vector<Contribution> rounds_[2] ABSL_GUARDED_BY(mutex_);
  absl::Status failure_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace kvjit::runtime::dist

#endif  // KVJIT_RUNTIME_DIST_INPROCESSCOMMUNICATOR_H_
