// The kernels around tensor parallelism's collectives. The collectives
// themselves are NCCL's, which the CUDA runner calls between a path's
// launches and its epilogue; runtime/cuda/CollectiveLayout.h states what
// each side does and where the data lies.

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "codegen/cuda/KernelEmitter.h"
#include "runtime/core/StatusMacros.h"
#include "runtime/cuda/CollectiveLayout.h"
#include "runtime/schema/OpOperands.h"

namespace kvjit::codegen::cuda {
namespace {

constexpr uint32_t kCollectiveThreads = 256;

constexpr char kAllGatherPack[] = R"cuda(
// AllGather's pack: x [rows, @COLUMNS@] into scratch as [rows, @PADDED@], the
// padding zero, so that every rank hands NCCL's all-gather the same count.
extern "C" __global__ void __launch_bounds__(@THREADS@)
KVJIT_KERNEL(const kvjit::cuda_abi::LaunchArgs args) {
  constexpr int64_t kColumns = @COLUMNS@;
  constexpr int64_t kPadded = @PADDED@;
  const int64_t count = @ROWS@ * kPadded;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= count) return;
  const int64_t row = i / kPadded, column = i % kPadded;
  const int64_t x_index = row * kColumns + column;
  static_cast<float*>(args.buffers[@SCRATCH@])[i] = column < kColumns ? @LOAD@ : 0.0f;
}
)cuda";

constexpr char kAllGatherInterleave[] = R"cuda(
// AllGather's interleave: the ranks' packed blocks [rows, @PADDED@], gathered
// one after the other after this rank's in scratch, into the output's rows
// [rows, @WIDTH@], rank r's @RANKS_COLUMNS@ columns from first_column[r] on.
extern "C" __global__ void __launch_bounds__(@THREADS@)
KVJIT_KERNEL(const kvjit::cuda_abi::LaunchArgs args) {
  constexpr int64_t kPadded = @PADDED@;
  constexpr int64_t kWidth = @WIDTH@;
  const int64_t first_column[] = {@FIRST_COLUMNS@};
  const int64_t rows = @ROWS@;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= rows * kWidth) return;
  const int64_t row = i / kWidth, column = i % kWidth;
  int rank = 0;
  while (column >= first_column[rank + 1]) ++rank;
  const float* gathered = static_cast<const float*>(args.buffers[@SCRATCH@]) + rows * kPadded;
  static_cast<float*>(args.buffers[@OUT@])[i] =
      gathered[(rank * rows + row) * kPadded + column - first_column[rank]];
}
)cuda";

}  // namespace

absl::StatusOr<InstructionSpec> EmitAllReduce(const EmitContext& context) {
  // The launches are a Copy's: x into the output unless the two share their
  // bytes. The runner then sums the output over the ranks in place.
  static_assert(kvx::OperandIndex(kvx::AllReduceOperand::X) ==
                kvx::OperandIndex(kvx::CopyOperand::X));
  return EmitCopy(context);
}

absl::StatusOr<InstructionSpec> EmitAllGather(const EmitContext& context) {
  const kvx::Instruction& instruction = context.instruction;
  const kvx::TensorRef& x = kvx::InputOf(instruction, kvx::AllGatherOperand::X);
  const kvx::TensorRef& out = *instruction.outputs()->Get(0);
  if (x.shape()->size() != 2 || out.shape()->size() != 2) {
    return absl::InvalidArgumentError("AllGather gathers matrices [rows, columns]");
  }
  KVJIT_ASSIGN_OR_RETURN(const int64_t columns, StaticDim(x, 1, "this rank's columns"));
  KVJIT_ASSIGN_OR_RETURN(const int64_t width, StaticDim(out, 1, "the gathered columns"));
  if (out.row_stride() != 0 && out.row_stride() != static_cast<uint64_t>(width)) {
    return absl::UnimplementedError("an AllGather into a column view");
  }
  KVJIT_ASSIGN_OR_RETURN(const int64_t padded, ::kvjit::cuda::PaddedColumns(instruction));
  KVJIT_ASSIGN_OR_RETURN(const uint64_t scratch_per_row,
                         ::kvjit::cuda::AllGatherScratchBytesPerRow(instruction));
  std::vector<int64_t> first_columns = {0};
  for (int64_t rank_columns : *instruction.params_as_AllGatherParams()->rank_columns()) {
    first_columns.push_back(first_columns.back() + rank_columns);
  }
  if (first_columns.back() != width) {
    return absl::InvalidArgumentError(absl::StrCat("the ranks' columns add up to ",
                                                   first_columns.back(), ", not the output's ",
                                                   width));
  }
  KVJIT_ASSIGN_OR_RETURN(
      std::string load,
      ElementLoad(context, kvx::OperandIndex(kvx::AllGatherOperand::X), "x_index"));
  const std::string rows = ExtentExpr(x, 0, 1);
  const std::string scratch = absl::StrCat(ScratchBuffer(instruction));
  const std::string threads = absl::StrCat(kCollectiveThreads);
  const uint32_t pack = context.kernels.Add(
      "all_gather_pack", Fill(kAllGatherPack, {{"THREADS", threads},
                                               {"COLUMNS", absl::StrCat(columns)},
                                               {"PADDED", absl::StrCat(padded)},
                                               {"ROWS", rows},
                                               {"SCRATCH", scratch},
                                               {"LOAD", load}}));
  const uint32_t interleave = context.kernels.Add(
      "all_gather_interleave",
      Fill(kAllGatherInterleave,
           {{"THREADS", threads},
            {"PADDED", absl::StrCat(padded)},
            {"WIDTH", absl::StrCat(width)},
            {"RANKS_COLUMNS",
             absl::StrJoin(*instruction.params_as_AllGatherParams()->rank_columns(), ", ")},
            {"FIRST_COLUMNS", absl::StrJoin(first_columns, ", ")},
            {"ROWS", rows},
            {"SCRATCH", scratch},
            {"OUT", absl::StrCat(OutputBuffer(instruction, 0))}}));
  SizeExpr packed = ExtentFactors(x, 0, 1);
  packed.emplace_back(kvx::DimKind::Static, padded, 1);
  SizeExpr gathered = ExtentFactors(x, 0, 1);
  gathered.emplace_back(kvx::DimKind::Static, width, 1);
  PathSpec path;
  path.launches.push_back(Launch(pack, kCollectiveThreads, DivideFirst(packed, kCollectiveThreads)));
  path.epilogue.push_back(
      Launch(interleave, kCollectiveThreads, DivideFirst(gathered, kCollectiveThreads)));
  path.scratch_bytes = ExtentFactors(x, 0, 1);
  path.scratch_bytes.emplace_back(kvx::DimKind::Static, static_cast<int64_t>(scratch_per_row), 1);
  return SamePaths(StepTokens(), path);
}

}  // namespace kvjit::codegen::cuda
