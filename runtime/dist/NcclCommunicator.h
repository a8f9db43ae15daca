#ifndef KVJIT_RUNTIME_DIST_NCCLCOMMUNICATOR_H_
#define KVJIT_RUNTIME_DIST_NCCLCOMMUNICATOR_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/dist/Communicator.h"
#include "runtime/dist/DeviceCommunicator.h"
#include "runtime/dist/NcclLibrary.h"

namespace kvjit::runtime::dist {

// The device collectives over an NCCL communicator, one per rank (process)
// and GPU. Not thread-safe: one thread (the runner's) makes every call.
class NcclCommunicator final : public DeviceCommunicator {
 public:
  // Joins the ranks of `host` in one NCCL communicator, as TensorRT-LLM
  // does: rank 0 makes NCCL's unique id and broadcasts it over `host` (whose
  // deadline bounds the wait for it), then every rank calls ncclCommInitRank
  // with it, which returns once every rank has. NCCL binds the communicator
  // to the CUDA device current on the calling thread, so the caller makes
  // `device_ordinal`'s context current first; a communicator on another
  // device is refused. `library` must outlive the communicator.
  static absl::StatusOr<std::unique_ptr<NcclCommunicator>> Create(Communicator& host,
                                                                  NcclLibrary& library,
                                                                  int device_ordinal);

  // Destroys the communicator unless it was aborted.
  ~NcclCommunicator() override;
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  absl::Status AllReduceSum(float* device_values, int64_t count, void* cuda_stream) override;
  absl::Status AllGather(const float* device_local, int64_t count_per_rank,
                         float* device_gathered, void* cuda_stream) override;
  absl::Status Broadcast(void* device_bytes, int64_t byte_count, int root,
                         void* cuda_stream) override;
  absl::Status CheckHealth() override;
  absl::Status AwaitStream(const std::function<absl::StatusOr<bool>()>& stream_finished,
                           absl::Duration timeout) override;

 private:
  NcclCommunicator(NcclLibrary& library, nccl::ncclComm_t comm, int rank, int size,
                   int device_ordinal)
      : library_(library), comm_(comm), rank_(rank), size_(size), device_ordinal_(device_ordinal) {}

  // "NCCL rank 1 of 2 (cuda:1)": who failed, for every message.
  std::string Who() const;

  // The error every call returns once the communicator is aborted, or OK.
  absl::Status Usable() const;

  // InvalidArgument for a negative count, or a positive one without buffers:
  // checked here, because NCCL would read a negative count as a huge size_t.
  absl::Status CheckBuffer(const char* collective, int64_t count, bool has_buffers) const;

  // Checks the result of an enqueued collective; a failure aborts.
  absl::Status CheckEnqueued(nccl::ncclResult_t result, const char* collective);

  // Aborts the communicator: NCCL stops its kernels, so that this rank's
  // queued collectives return, and every later call returns `failure`.
  absl::Status Abort(absl::Status failure);

  NcclLibrary& library_;
  nccl::ncclComm_t comm_;  // null once aborted
  int rank_;
  int size_;
  int device_ordinal_;
  absl::Status failure_;
};

}  // namespace kvjit::runtime::dist

#endif  // KVJIT_RUNTIME_DIST_NCCLCOMMUNICATOR_H_
