#include "runtime/cuda/CollectiveLayout.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "runtime/core/StatusMacros.h"
#include "runtime/exec/OpTable.h"
#include "runtime/schema/OpOperands.h"

namespace kvjit::cuda {

bool IsCollective(kvx::OpCode op) {
  return op == kvx::OpCode::AllReduce || op == kvx::OpCode::AllGather;
}

absl::StatusOr<int64_t> PaddedColumns(const kvx::Instruction& instruction) {
  const kvx::AllGatherParams* params = instruction.params_as_AllGatherParams();
  if (params == nullptr || params->rank_columns() == nullptr ||
      params->rank_columns()->size() == 0) {
    return absl::InvalidArgumentError("an AllGather without its ranks' columns");
  }
  const auto& columns = *params->rank_columns();
  return *std::max_element(columns.begin(), columns.end());
}

absl::StatusOr<uint64_t> AllGatherScratchBytesPerRow(const kvx::Instruction& instruction) {
  KVJIT_ASSIGN_OR_RETURN(const int64_t padded, PaddedColumns(instruction));
  const uint64_t ranks = instruction.params_as_AllGatherParams()->rank_columns()->size();
  return (ranks + 1) * static_cast<uint64_t>(padded) * sizeof(float);
}

absl::StatusOr<CollectiveCall> PlanCollective(const kvx::Instruction& instruction,
                                              const runtime::StepSizes& sizes) {
  CollectiveCall call;
  call.op = instruction.op();
  switch (instruction.op()) {
    case kvx::OpCode::AllReduce: {
      const kvx::TensorRef& out = *instruction.outputs()->Get(0);
      call.count = 1;
      for (int axis = 0; axis < static_cast<int>(out.shape()->size()); ++axis) {
        call.count *= runtime::Extent(out, axis, sizes);
      }
      return call;
    }
    case kvx::OpCode::AllGather: {
      const kvx::TensorRef& x = kvx::InputOf(instruction, kvx::AllGatherOperand::X);
      KVJIT_ASSIGN_OR_RETURN(const int64_t padded, PaddedColumns(instruction));
      KVJIT_ASSIGN_OR_RETURN(const uint64_t bytes_per_row, AllGatherScratchBytesPerRow(instruction));
      const int64_t rows = runtime::Extent(x, 0, sizes);
      call.count = rows * padded;
      call.gathered_offset_bytes = static_cast<uint64_t>(call.count) * sizeof(float);
      call.scratch_bytes = static_cast<uint64_t>(rows) * bytes_per_row;
      return call;
    }
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          kvx::EnumNameOpCode(instruction.op()), " is not a tensor-parallel collective"));
  }
}

}  // namespace kvjit::cuda
