#ifndef KVJIT_RUNTIME_DIST_NCCLAPI_H_
#define KVJIT_RUNTIME_DIST_NCCLAPI_H_

#include <cstddef>

// The part of NCCL's C API that kvjit calls, declared here from NVIDIA's
// public API documentation instead of included from nccl.h: libnccl is loaded
// at run time (NcclLibrary.h), so builds and CI need no NCCL. The values are
// those of NCCL 2.28's nccl.h; every one of them has been stable since
// NCCL 2.14, the release that added the last result code used here
// (ncclInProgress), and the layouts below have not changed since NCCL 2.0.
// The names keep NCCL's spelling inside kvjit's namespace, so that this
// header can sit beside a real nccl.h without clashing.
namespace kvjit::runtime::dist::nccl {

// NCCL_UNIQUE_ID_BYTES: the id every rank of a communicator passes to
// ncclCommInitRank, made by one rank with ncclGetUniqueId.
inline constexpr size_t kUniqueIdBytes = 128;
struct ncclUniqueId {
  char internal[kUniqueIdBytes];
};

// An opaque handle owned by NCCL.
struct ncclComm;
using ncclComm_t = ncclComm*;

enum ncclResult_t : int {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7,
};

// Only the types kvjit moves: f32 activations, and bytes.
enum ncclDataType_t : int {
  ncclUint8 = 1,
  ncclFloat32 = 7,
};

enum ncclRedOp_t : int {
  ncclSum = 0,
};

// cudaStream_t is a pointer to an opaque struct; the runtime passes its
// CUstream (the same handle) as void*.
using ncclGetVersion_t = ncclResult_t (*)(int* version);
using ncclGetUniqueId_t = ncclResult_t (*)(ncclUniqueId* unique_id);
using ncclCommInitRank_t = ncclResult_t (*)(ncclComm_t* comm, int rank_count,
                                            ncclUniqueId unique_id, int rank);
using ncclCommDestroy_t = ncclResult_t (*)(ncclComm_t comm);
using ncclCommAbort_t = ncclResult_t (*)(ncclComm_t comm);
using ncclCommGetAsyncError_t = ncclResult_t (*)(ncclComm_t comm, ncclResult_t* async_error);
using ncclCommCuDevice_t = ncclResult_t (*)(ncclComm_t comm, int* device);
using ncclAllReduce_t = ncclResult_t (*)(const void* send, void* receive, size_t count,
                                         ncclDataType_t type, ncclRedOp_t op, ncclComm_t comm,
                                         void* stream);
using ncclAllGather_t = ncclResult_t (*)(const void* send, void* receive, size_t count_per_rank,
                                         ncclDataType_t type, ncclComm_t comm, void* stream);
using ncclBroadcast_t = ncclResult_t (*)(const void* send, void* receive, size_t count,
                                         ncclDataType_t type, int root, ncclComm_t comm,
                                         void* stream);
using ncclGetErrorString_t = const char* (*)(ncclResult_t result);

}  // namespace kvjit::runtime::dist::nccl

#endif  // KVJIT_RUNTIME_DIST_NCCLAPI_H_
