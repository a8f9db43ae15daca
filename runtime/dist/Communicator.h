#ifndef KVJIT_RUNTIME_DIST_COMMUNICATOR_H_
#define KVJIT_RUNTIME_DIST_COMMUNICATOR_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"

// The collectives that tensor parallelism needs between the ranks of one
// model (docs/scale-out.md), over host memory. Every rank calls the same
// collectives in the same order with matching sizes; a rank that does not
// come within the communicator's deadline makes the call fail with
// DeadlineExceeded, naming the collective, instead of hanging.
namespace kvjit::runtime::dist {

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;

  // Sums `values` elementwise over every rank, in place. The sum is the same
  // on every rank, bit for bit.
  virtual absl::Status AllReduceSum(absl::Span<float> values) = 0;

  // Every rank's `local` one after the other, in rank order, into `gathered`
  // on every rank; rank r passes counts[r] elements, and `gathered` holds
  // the sum of `counts`.
  virtual absl::Status AllGather(absl::Span<const float> local, absl::Span<const int64_t> counts,
                                 absl::Span<float> gathered) = 0;

  // Rank `root`'s `bytes` into every rank's; each rank passes the same size.
  // With `wait_forever`, no deadline applies: a worker waiting for rank 0's
  // next command may wait as long as the server is idle.
  virtual absl::Status Broadcast(absl::Span<uint8_t> bytes, int root, bool wait_forever = false) = 0;

  virtual absl::Status Barrier() = 0;
};

// Rank `root`'s `bytes` into every rank's, resized to its size: the size
// first, then the bytes.
absl::Status BroadcastBytes(Communicator& communicator, std::vector<uint8_t>& bytes, int root,
                            bool wait_forever = false);

}  // namespace kvjit::runtime::dist

#endif  // KVJIT_RUNTIME_DIST_COMMUNICATOR_H_
