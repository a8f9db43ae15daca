#ifndef KVJIT_RUNTIME_CUDA_COLLECTIVELAYOUT_H_
#define KVJIT_RUNTIME_CUDA_COLLECTIVELAYOUT_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "runtime/exec/Executable.h"
#include "runtime/schema/kvx_generated.h"

// How tensor parallelism's collectives (AllReduce, AllGather) run on GPUs:
// the one agreement between the kernels the compiler generates for them
// (codegen/cuda/CollectiveKernels.cpp) and the CUDA runner that calls the
// device communicator (NCCL) between those kernels
// (runtime/cuda/CudaStepRunner.cpp). A collective's CudaPath is its
// `launches`, then the collective, then its `epilogue`:
//
// - AllReduce: the launches copy x into the output where the two are not
//   the same bytes (none where the sum is in place); the collective sums the
//   output's elements over the ranks, in place.
// - AllGather: NCCL gathers the same count from every rank, and the ranks'
//   blocks [rows, columns_r] differ in width when the columns do not split
//   evenly. The launches pack x into scratch as [rows, padded_columns] (the
//   widest rank's columns; the padding is zero); the collective gathers
//   every rank's packed block, one after the other in rank order, into
//   scratch after this rank's; the epilogue interleaves those blocks'
//   columns into the output's rows [rows, sum of columns].
namespace kvjit::cuda {

bool IsCollective(kvx::OpCode op);

// AllGather's widest rank's columns; an error without columns.
absl::StatusOr<int64_t> PaddedColumns(const kvx::Instruction& instruction);

// AllGather's scratch per row of x, in bytes: this rank's packed row and
// every rank's gathered one.
absl::StatusOr<uint64_t> AllGatherScratchBytesPerRow(const kvx::Instruction& instruction);

// One collective of one step.
struct CollectiveCall {
  kvx::OpCode op = kvx::OpCode::AllReduce;
  // AllReduce: the elements summed (at the output). AllGather: each rank's
  // packed block, in floats (at scratch offset 0).
  int64_t count = 0;
  // AllGather: where the gathered blocks start in scratch, in bytes.
  uint64_t gathered_offset_bytes = 0;
  // AllGather: the scratch the call reads and writes, in bytes.
  uint64_t scratch_bytes = 0;
};

// The call `instruction` (a collective) makes in a step of `sizes`.
absl::StatusOr<CollectiveCall> PlanCollective(const kvx::Instruction& instruction,
                                              const runtime::StepSizes& sizes);

}  // namespace kvjit::cuda

#endif  // KVJIT_RUNTIME_CUDA_COLLECTIVELAYOUT_H_
