#include "runtime/dist/NcclCommunicator.h"

#include <array>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "runtime/core/StatusMacros.h"

namespace kvjit::runtime::dist {
namespace {

// Rank 0's bootstrap message: one byte saying whether it could make the id,
// then the id. The flag lets the other ranks fail at once with rank 0's
// reason instead of waiting in ncclCommInitRank for a rank that never comes.
constexpr size_t kIdReadyByte = 0;
constexpr size_t kIdOffset = 1;
using BootstrapMessage = std::array<uint8_t, kIdOffset + nccl::kUniqueIdBytes>;

// Between two polls of a stream: short against a decode step of a few
// milliseconds, long enough not to keep a core busy in ncclCommGetAsyncError.
constexpr absl::Duration kPollInterval = absl::Microseconds(50);

absl::Status WithPrefix(const absl::Status& status, absl::string_view prefix) {
  return absl::Status(status.code(), absl::StrCat(prefix, ": ", status.message()));
}

}  // namespace

absl::StatusOr<std::unique_ptr<NcclCommunicator>> NcclCommunicator::Create(Communicator& host,
                                                                           NcclLibrary& library,
                                                                           int device_ordinal) {
  const int rank = host.rank();
  const int size = host.size();
  const std::string who =
      absl::StrCat("NCCL rank ", rank, " of ", size, " (cuda:", device_ordinal, ")");
  if (device_ordinal < 0) {
    return absl::InvalidArgumentError(absl::StrCat(who, ": the device ordinal is negative"));
  }

  BootstrapMessage message{};
  absl::Status made_id;
  if (rank == 0) {
    nccl::ncclUniqueId id;
    made_id = library.Check(library.ncclGetUniqueId(&id), "ncclGetUniqueId");
    if (made_id.ok()) {
      message[kIdReadyByte] = 1;
      std::memcpy(message.data() + kIdOffset, id.internal, nccl::kUniqueIdBytes);
    }
  }
  // Rank 0 broadcasts even when it failed, so that no rank waits for an id.
  absl::Status broadcast = host.Broadcast(absl::MakeSpan(message), /*root=*/0);
  if (!broadcast.ok()) {
    return WithPrefix(broadcast, absl::StrCat(who, ": broadcasting NCCL's unique id from rank 0"));
  }
  if (!made_id.ok()) return WithPrefix(made_id, who);
  if (message[kIdReadyByte] != 1) {
    return absl::UnavailableError(
        absl::StrCat(who, ": rank 0 could not make NCCL's unique id (its log says why)"));
  }

  nccl::ncclUniqueId id;
  std::memcpy(id.internal, message.data() + kIdOffset, nccl::kUniqueIdBytes);
  nccl::ncclComm_t comm = nullptr;
  KVJIT_RETURN_IF_ERROR(
      WithPrefix(library.Check(library.ncclCommInitRank(&comm, size, id, rank), "ncclCommInitRank"),
                 absl::StrCat(who, ", NCCL ", library.version())));
  // Owned from here, so that every return below destroys it.
  std::unique_ptr<NcclCommunicator> communicator(
      new NcclCommunicator(library, comm, rank, size, device_ordinal));

  int device = -1;
  KVJIT_RETURN_IF_ERROR(
      WithPrefix(library.Check(library.ncclCommCuDevice(comm, &device), "ncclCommCuDevice"), who));
  if (device != device_ordinal) {
    return absl::FailedPreconditionError(absl::StrCat(
        who, ": the NCCL communicator is on CUDA device ", device, ", not ", device_ordinal,
        "; make device ", device_ordinal, "'s context current on this thread before creating it"));
  }
  return communicator;
}

NcclCommunicator::~NcclCommunicator() {
  // A destructor cannot report a failure; the communicator is gone either way.
  if (comm_ != nullptr) library_.ncclCommDestroy(comm_);
}

std::string NcclCommunicator::Who() const {
  return absl::StrCat("NCCL rank ", rank_, " of ", size_, " (cuda:", device_ordinal_, ")");
}

absl::Status NcclCommunicator::Usable() const {
  if (comm_ != nullptr) return absl::OkStatus();
  return absl::Status(failure_.code(),
                      absl::StrCat(failure_.message(), " (the communicator was aborted then)"));
}

absl::Status NcclCommunicator::Abort(absl::Status failure) {
  absl::Status aborted = library_.Check(library_.ncclCommAbort(comm_), "ncclCommAbort");
  comm_ = nullptr;
  std::string message = absl::StrCat(failure.message(), "; the NCCL communicator was aborted");
  if (!aborted.ok()) absl::StrAppend(&message, ", and ", aborted.message());
  failure_ = absl::Status(failure.code(), message);
  return failure_;
}

absl::Status NcclCommunicator::CheckBuffer(const char* collective, int64_t count,
                                           bool has_buffers) const {
  if (count < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(Who(), ": ", collective, " of a negative count (", count, ")"));
  }
  if (count > 0 && !has_buffers) {
    return absl::InvalidArgumentError(
        absl::StrCat(Who(), ": ", collective, " of ", count, " elements with a null buffer"));
  }
  return absl::OkStatus();
}

absl::Status NcclCommunicator::CheckEnqueued(nccl::ncclResult_t result, const char* collective) {
  absl::Status enqueued = library_.Check(result, collective);
  if (enqueued.ok()) return enqueued;
  // A collective this rank did not enqueue leaves the others waiting for it.
  return Abort(WithPrefix(enqueued, Who()));
}

absl::Status NcclCommunicator::AllReduceSum(float* device_values, int64_t count,
                                            void* cuda_stream) {
  KVJIT_RETURN_IF_ERROR(Usable());
  KVJIT_RETURN_IF_ERROR(CheckBuffer("all-reduce", count, device_values != nullptr));
  return CheckEnqueued(
      library_.ncclAllReduce(device_values, device_values, static_cast<size_t>(count),
                             nccl::ncclFloat32, nccl::ncclSum, comm_, cuda_stream),
      "ncclAllReduce");
}

absl::Status NcclCommunicator::AllGather(const float* device_local, int64_t count_per_rank,
                                         float* device_gathered, void* cuda_stream) {
  KVJIT_RETURN_IF_ERROR(Usable());
  KVJIT_RETURN_IF_ERROR(CheckBuffer("all-gather", count_per_rank,
                                    device_local != nullptr && device_gathered != nullptr));
  return CheckEnqueued(
      library_.ncclAllGather(device_local, device_gathered, static_cast<size_t>(count_per_rank),
                             nccl::ncclFloat32, comm_, cuda_stream),
      "ncclAllGather");
}

absl::Status NcclCommunicator::Broadcast(void* device_bytes, int64_t byte_count, int root,
                                         void* cuda_stream) {
  KVJIT_RETURN_IF_ERROR(Usable());
  if (root < 0 || root >= size_) {
    return absl::InvalidArgumentError(
        absl::StrCat(Who(), ": broadcast from rank ", root, ", outside the ", size_, " ranks"));
  }
  KVJIT_RETURN_IF_ERROR(CheckBuffer("broadcast", byte_count, device_bytes != nullptr));
  return CheckEnqueued(
      library_.ncclBroadcast(device_bytes, device_bytes, static_cast<size_t>(byte_count),
                             nccl::ncclUint8, root, comm_, cuda_stream),
      "ncclBroadcast");
}

absl::Status NcclCommunicator::CheckHealth() {
  KVJIT_RETURN_IF_ERROR(Usable());
  nccl::ncclResult_t async_error = nccl::ncclSuccess;
  absl::Status polled =
      library_.Check(library_.ncclCommGetAsyncError(comm_, &async_error), "ncclCommGetAsyncError");
  if (!polled.ok()) return Abort(WithPrefix(polled, Who()));
  // ncclInProgress only says a non-blocking operation has not finished yet.
  if (async_error == nccl::ncclSuccess || async_error == nccl::ncclInProgress) {
    return absl::OkStatus();
  }
  return Abort(WithPrefix(library_.Check(async_error, "an enqueued collective"), Who()));
}

absl::Status NcclCommunicator::AwaitStream(
    const std::function<absl::StatusOr<bool>()>& stream_finished, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    KVJIT_RETURN_IF_ERROR(CheckHealth());
    absl::StatusOr<bool> finished = stream_finished();
    // A failed stream leaves this rank's share of the collectives undone.
    if (!finished.ok()) return Abort(WithPrefix(finished.status(), Who()));
    if (*finished) return CheckHealth();
    if (absl::Now() >= deadline) {
      return Abort(absl::DeadlineExceededError(absl::StrCat(
          Who(), ": the stream's collectives did not finish within ", absl::FormatDuration(timeout),
          " (a rank is missing from a collective, or has failed)")));
    }
    absl::SleepFor(kPollInterval);
  }
}

}  // namespace kvjit::runtime::dist
