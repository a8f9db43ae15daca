#ifndef KVJIT_TESTS_UNIT_RUNTIME_DIST_FAKENCCL_H_
#define KVJIT_TESTS_UNIT_RUNTIME_DIST_FAKENCCL_H_

// A stand-in libnccl for tests on machines without NCCL or a GPU: the entry
// points NcclLibrary resolves, over host memory, for the ranks of one
// process. Each rank is a thread; the ranks that pass the same unique id to
// ncclCommInitRank share one group, and every collective is a rendezvous of
// the group's ranks that really moves the data (an all-reduce of two ranks
// sums both ranks' values). Collectives run to completion before they
// return, so a test's stream is always finished. The functions below steer
// and observe it.

extern "C" {

// Forgets every group and counter, and sets the version back to 2.28.3.
void FakeNccl_Reset();
// The code ncclGetVersion reports.
void FakeNccl_SetVersion(int version_code);
// The calling thread's current CUDA device, as cudaSetDevice would set it:
// ncclCommInitRank binds the communicator to it.
void FakeNccl_SetCurrentDevice(int device);
// The next ncclGetUniqueId, on any thread, returns `result` (an ncclResult_t).
void FakeNccl_FailNextUniqueId(int result);
// The calling thread's next collective returns `result` without running.
void FakeNccl_FailNextCollective(int result);
// ncclCommGetAsyncError reports `result` for every live communicator of `rank`.
void FakeNccl_FailAsynchronously(int rank, int result);

int FakeNccl_UniqueIdsMade();
int FakeNccl_CommsAborted();
int FakeNccl_CommsDestroyed();
// The stream of the calling thread's last collective.
void* FakeNccl_LastStream();

}  // extern "C"

#endif  // KVJIT_TESTS_UNIT_RUNTIME_DIST_FAKENCCL_H_
