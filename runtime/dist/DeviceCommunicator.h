#ifndef KVJIT_RUNTIME_DIST_DEVICECOMMUNICATOR_H_
#define KVJIT_RUNTIME_DIST_DEVICECOMMUNICATOR_H_

#include <cstdint>
#include <functional>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

// The collectives of tensor parallelism (docs/scale-out.md) over device
// memory, for the CUDA runner; Communicator.h is their host-memory
// counterpart. Each call only enqueues the collective on `cuda_stream` (a
// CUstream, passed as an opaque pointer so that this interface needs no CUDA
// header) and returns: the data is there once the stream's work before and
// including it has finished, which the caller waits for with
// AwaitStream. Every rank calls the same collectives in the same order with
// the same counts; a rank that does not is a hang that AwaitStream bounds.
namespace kvjit::runtime::dist {

class DeviceCommunicator {
 public:
  virtual ~DeviceCommunicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;

  // Sums `count` floats at `device_values` elementwise over every rank, in
  // place.
  virtual absl::Status AllReduceSum(float* device_values, int64_t count, void* cuda_stream) = 0;

  // Every rank's `count_per_rank` floats at `device_local` one after the
  // other, in rank order, into `device_gathered` (size() * count_per_rank
  // floats) on every rank. The collective needs the same count from every
  // rank, so shards of uneven sizes are padded by the caller to the largest
  // shard: rank r's shard then starts at r * count_per_rank in the result,
  // followed by its padding, which the caller skips when it reads the
  // gathered rows.
  virtual absl::Status AllGather(const float* device_local, int64_t count_per_rank,
                                 float* device_gathered, void* cuda_stream) = 0;

  // Rank `root`'s `byte_count` bytes at `device_bytes` into every rank's, in
  // place.
  virtual absl::Status Broadcast(void* device_bytes, int64_t byte_count, int root,
                                 void* cuda_stream) = 0;

  // OK while no collective has failed asynchronously. On a failure (a peer
  // gone, a network error), aborts the communicator, so that collectives
  // still queued on any stream return instead of hanging, and returns the
  // error naming this rank; every later call returns it again.
  virtual absl::Status CheckHealth() = 0;

  // Waits until `stream_finished` (cuStreamQuery on the stream the
  // collectives were enqueued on: true once its work is done, an error for
  // a failed stream) says the stream is done, checking the communicator's
  // health between polls. After `timeout` without that, aborts the
  // communicator and returns DEADLINE_EXCEEDED naming this rank: a rank
  // that never joins the collective must not hang the others forever, as a
  // plain cuStreamSynchronize would.
  virtual absl::Status AwaitStream(const std::function<absl::StatusOr<bool>()>& stream_finished,
                                   absl::Duration timeout) = 0;
};

}  // namespace kvjit::runtime::dist

#endif  // KVJIT_RUNTIME_DIST_DEVICECOMMUNICATOR_H_
