// The stand-in libnccl of FakeNccl.h. Built twice: as a whole library, and
// with KVJIT_FAKE_NCCL_WITHOUT_ASYNC_ERROR as an NCCL too old to have
// ncclCommGetAsyncError, for the loader's missing-symbol error.

#include "tests/unit/runtime/dist/FakeNccl.h"

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "runtime/dist/NcclApi.h"

namespace nccl = kvjit::runtime::dist::nccl;

namespace {

// A rank that never arrives fails the rendezvous instead of hanging a test.
constexpr auto kRendezvousTimeout = std::chrono::seconds(10);

// The ranks that share one unique id, and the buffers of the collective
// they are in.
struct Group {
  explicit Group(int rank_count)
      : rank_count(rank_count), sends(rank_count), receives(rank_count) {}

  // Returns once every rank has arrived, or false after the timeout.
  bool Rendezvous(std::unique_lock<std::mutex>& lock) {
    const long generation_now = generation;
    if (++arrived == rank_count) {
      arrived = 0;
      ++generation;
      everyone_arrived.notify_all();
      return true;
    }
    return everyone_arrived.wait_for(lock, kRendezvousTimeout,
                                     [&] { return generation != generation_now; });
  }

  const int rank_count;
  std::mutex mutex;
  std::condition_variable everyone_arrived;
  int arrived = 0;
  long generation = 0;
  std::vector<const void*> sends;
  std::vector<void*> receives;
};

struct State {
  std::mutex mutex;
  std::map<std::string, std::shared_ptr<Group>> groups;  // by unique id
  std::set<nccl::ncclComm*> live;
  int version_code = 22803;
  int unique_ids_made = 0;
  int comms_aborted = 0;
  int comms_destroyed = 0;
  nccl::ncclResult_t next_unique_id_result = nccl::ncclSuccess;
};

State& Shared() {
  static State state;
  return state;
}

thread_local int current_device = 0;
thread_local void* last_stream = nullptr;
thread_local nccl::ncclResult_t next_collective_result = nccl::ncclSuccess;

size_t ElementBytes(nccl::ncclDataType_t type) {
  switch (type) {
    case nccl::ncclUint8:
      return 1;
    case nccl::ncclFloat32:
      return 4;
  }
  return 0;
}

}  // namespace

struct kvjit::runtime::dist::nccl::ncclComm {
  std::shared_ptr<Group> group;
  int rank;
  int device;
  nccl::ncclResult_t async_error = nccl::ncclSuccess;
};

namespace {

// Every rank posts its buffers, waits for the others, computes its result
// from theirs into a copy, waits until all have read, then writes it: the
// receive buffer may be the send buffer (in place), which another rank may
// still be reading before the second rendezvous.
template <typename Compute>
nccl::ncclResult_t Collective(nccl::ncclComm* comm, const void* send, void* receive,
                              size_t receive_bytes, void* stream, Compute compute) {
  last_stream = stream;
  if (comm == nullptr) return nccl::ncclInvalidArgument;
  if (next_collective_result != nccl::ncclSuccess) {
    const nccl::ncclResult_t result = next_collective_result;
    next_collective_result = nccl::ncclSuccess;
    return result;
  }
  Group& group = *comm->group;
  std::unique_lock<std::mutex> lock(group.mutex);
  group.sends[comm->rank] = send;
  group.receives[comm->rank] = receive;
  if (!group.Rendezvous(lock)) return nccl::ncclSystemError;
  std::vector<unsigned char> result(receive_bytes);
  compute(group.sends, result.data());
  if (!group.Rendezvous(lock)) return nccl::ncclSystemError;
  if (receive_bytes > 0) std::memcpy(receive, result.data(), receive_bytes);
  return nccl::ncclSuccess;
}

}  // namespace

extern "C" {

void FakeNccl_Reset() {
  State& state = Shared();
  std::lock_guard<std::mutex> lock(state.mutex);
  state.groups.clear();
  state.version_code = 22803;
  state.unique_ids_made = 0;
  state.comms_aborted = 0;
  state.comms_destroyed = 0;
  state.next_unique_id_result = nccl::ncclSuccess;
}

void FakeNccl_SetVersion(int version_code) {
  std::lock_guard<std::mutex> lock(Shared().mutex);
  Shared().version_code = version_code;
}

void FakeNccl_SetCurrentDevice(int device) { current_device = device; }

void FakeNccl_FailNextUniqueId(int result) {
  std::lock_guard<std::mutex> lock(Shared().mutex);
  Shared().next_unique_id_result = static_cast<nccl::ncclResult_t>(result);
}

void FakeNccl_FailNextCollective(int result) {
  next_collective_result = static_cast<nccl::ncclResult_t>(result);
}

void FakeNccl_FailAsynchronously(int rank, int result) {
  std::lock_guard<std::mutex> lock(Shared().mutex);
  for (nccl::ncclComm* comm : Shared().live) {
    if (comm->rank == rank) comm->async_error = static_cast<nccl::ncclResult_t>(result);
  }
}

int FakeNccl_UniqueIdsMade() {
  std::lock_guard<std::mutex> lock(Shared().mutex);
  return Shared().unique_ids_made;
}

int FakeNccl_CommsAborted() {
  std::lock_guard<std::mutex> lock(Shared().mutex);
  return Shared().comms_aborted;
}

int FakeNccl_CommsDestroyed() {
  std::lock_guard<std::mutex> lock(Shared().mutex);
  return Shared().comms_destroyed;
}

void* FakeNccl_LastStream() { return last_stream; }

nccl::ncclResult_t ncclGetVersion(int* version) {
  std::lock_guard<std::mutex> lock(Shared().mutex);
  *version = Shared().version_code;
  return nccl::ncclSuccess;
}

nccl::ncclResult_t ncclGetUniqueId(nccl::ncclUniqueId* unique_id) {
  State& state = Shared();
  std::lock_guard<std::mutex> lock(state.mutex);
  if (state.next_unique_id_result != nccl::ncclSuccess) {
    const nccl::ncclResult_t result = state.next_unique_id_result;
    state.next_unique_id_result = nccl::ncclSuccess;
    return result;
  }
  std::memset(unique_id->internal, 0, sizeof(unique_id->internal));
  std::snprintf(unique_id->internal, sizeof(unique_id->internal), "fake-nccl-id-%d",
                ++state.unique_ids_made);
  return nccl::ncclSuccess;
}

nccl::ncclResult_t ncclCommInitRank(nccl::ncclComm_t* comm, int rank_count,
                                    nccl::ncclUniqueId unique_id, int rank) {
  if (comm == nullptr || rank_count < 1 || rank < 0 || rank >= rank_count) {
    return nccl::ncclInvalidArgument;
  }
  std::shared_ptr<Group> group;
  {
    State& state = Shared();
    std::lock_guard<std::mutex> lock(state.mutex);
    std::shared_ptr<Group>& slot =
        state.groups[std::string(unique_id.internal, sizeof(unique_id.internal))];
    if (slot == nullptr) slot = std::make_shared<Group>(rank_count);
    if (slot->rank_count != rank_count) return nccl::ncclInvalidUsage;
    group = slot;
  }
  {
    // ncclCommInitRank returns once every rank has called it.
    std::unique_lock<std::mutex> lock(group->mutex);
    if (!group->Rendezvous(lock)) return nccl::ncclSystemError;
  }
  auto* made = new nccl::ncclComm{group, rank, current_device};
  std::lock_guard<std::mutex> lock(Shared().mutex);
  Shared().live.insert(made);
  *comm = made;
  return nccl::ncclSuccess;
}

nccl::ncclResult_t ncclCommDestroy(nccl::ncclComm_t comm) {
  std::lock_guard<std::mutex> lock(Shared().mutex);
  if (Shared().live.erase(comm) == 0) return nccl::ncclInvalidArgument;
  ++Shared().comms_destroyed;
  delete comm;
  return nccl::ncclSuccess;
}

nccl::ncclResult_t ncclCommAbort(nccl::ncclComm_t comm) {
  std::lock_guard<std::mutex> lock(Shared().mutex);
  if (Shared().live.erase(comm) == 0) return nccl::ncclInvalidArgument;
  ++Shared().comms_aborted;
  delete comm;
  return nccl::ncclSuccess;
}

#ifndef KVJIT_FAKE_NCCL_WITHOUT_ASYNC_ERROR
nccl::ncclResult_t ncclCommGetAsyncError(nccl::ncclComm_t comm, nccl::ncclResult_t* async_error) {
  std::lock_guard<std::mutex> lock(Shared().mutex);
  if (Shared().live.count(comm) == 0) return nccl::ncclInvalidArgument;
  *async_error = comm->async_error;
  return nccl::ncclSuccess;
}
#endif

nccl::ncclResult_t ncclCommCuDevice(nccl::ncclComm_t comm, int* device) {
  std::lock_guard<std::mutex> lock(Shared().mutex);
  if (Shared().live.count(comm) == 0) return nccl::ncclInvalidArgument;
  *device = comm->device;
  return nccl::ncclSuccess;
}

nccl::ncclResult_t ncclAllReduce(const void* send, void* receive, size_t count,
                                 nccl::ncclDataType_t type, nccl::ncclRedOp_t op,
                                 nccl::ncclComm_t comm, void* stream) {
  if (type != nccl::ncclFloat32 || op != nccl::ncclSum) return nccl::ncclInvalidArgument;
  return Collective(comm, send, receive, count * sizeof(float), stream,
                    [count](const std::vector<const void*>& sends, unsigned char* result) {
                      auto* sums = reinterpret_cast<float*>(result);
                      for (size_t i = 0; i < count; ++i) sums[i] = 0.0f;
                      for (const void* send : sends) {
                        const auto* values = static_cast<const float*>(send);
                        for (size_t i = 0; i < count; ++i) sums[i] += values[i];
                      }
                    });
}

nccl::ncclResult_t ncclAllGather(const void* send, void* receive, size_t count_per_rank,
                                 nccl::ncclDataType_t type, nccl::ncclComm_t comm, void* stream) {
  const size_t bytes_per_rank = count_per_rank * ElementBytes(type);
  if (bytes_per_rank == 0 && count_per_rank > 0) return nccl::ncclInvalidArgument;
  const size_t rank_count = comm != nullptr ? comm->group->rank_count : 0;
  return Collective(comm, send, receive, bytes_per_rank * rank_count, stream,
                    [bytes_per_rank](const std::vector<const void*>& sends, unsigned char* result) {
                      for (size_t r = 0; r < sends.size(); ++r) {
                        if (bytes_per_rank > 0) {
                          std::memcpy(result + r * bytes_per_rank, sends[r], bytes_per_rank);
                        }
                      }
                    });
}

nccl::ncclResult_t ncclBroadcast(const void* send, void* receive, size_t count,
                                 nccl::ncclDataType_t type, int root, nccl::ncclComm_t comm,
                                 void* stream) {
  const size_t bytes = count * ElementBytes(type);
  if (bytes == 0 && count > 0) return nccl::ncclInvalidArgument;
  if (comm != nullptr && (root < 0 || root >= comm->group->rank_count)) {
    return nccl::ncclInvalidArgument;
  }
  return Collective(comm, send, receive, bytes, stream,
                    [bytes, root](const std::vector<const void*>& sends, unsigned char* result) {
                      if (bytes > 0) std::memcpy(result, sends[root], bytes);
                    });
}

const char* ncclGetErrorString(nccl::ncclResult_t result) {
  switch (result) {
    case nccl::ncclSuccess:
      return "fake: no error";
    case nccl::ncclSystemError:
      return "fake: a system call failed";
    case nccl::ncclInvalidArgument:
      return "fake: invalid argument";
    case nccl::ncclInvalidUsage:
      return "fake: invalid usage";
    case nccl::ncclRemoteError:
      return "fake: a remote rank failed";
    default:
      return "fake: other error";
  }
}

}  // extern "C"
