// The reference evaluation of the dist dialect's collectives, over the
// communicator of the rank whose program the evaluator runs.

#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ir/Dist/DistOps.h"
#include "ir/Reference/ReferenceEvaluableOpInterface.h"
#include "ir/Reference/ReferenceFrame.h"
#include "runtime/core/StatusMacros.h"

namespace kvjit::reference {
namespace {

absl::Status Evaluate(dist::AllReduceOp op, ReferenceFrame& frame) {
  KVJIT_ASSIGN_OR_RETURN(runtime::dist::Communicator * communicator, frame.Communicator(op));
  RefTensor sum = frame.Get(op.getInput());
  KVJIT_RETURN_IF_ERROR(communicator->AllReduceSum(absl::MakeSpan(sum.values)));
  return frame.Bind(op->getResult(0), std::move(sum));
}

absl::Status Evaluate(dist::AllGatherOp op, ReferenceFrame& frame) {
  KVJIT_ASSIGN_OR_RETURN(runtime::dist::Communicator * communicator, frame.Communicator(op));
  const RefTensor& local = frame.Get(op.getInput());
  llvm::ArrayRef<int64_t> columns = op.getRankColumns();
  if (static_cast<int64_t>(columns.size()) != communicator->size() ||
      op.getRank() != communicator->rank()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "dist.all_gather is rank ", op.getRank(), " of ", columns.size(),
        " and is evaluated as rank ", communicator->rank(), " of ", communicator->size()));
  }
  const int64_t rows = local.shape.at(0);
  std::vector<int64_t> counts;
  int64_t width = 0;
  for (int64_t rank_columns : columns) {
    counts.push_back(rows * rank_columns);
    width += rank_columns;
  }
  std::vector<float> blocks(static_cast<size_t>(rows * width));
  KVJIT_RETURN_IF_ERROR(
      communicator->AllGather(absl::MakeConstSpan(local.values), counts, absl::MakeSpan(blocks)));
  RefTensor gathered = RefTensor::Float({rows, width}, std::vector<float>(blocks.size()));
  const float* block = blocks.data();
  int64_t first_column = 0;
  for (int64_t rank_columns : columns) {
    for (int64_t r = 0; r < rows; ++r) {
      std::memcpy(gathered.values.data() + r * width + first_column, block + r * rank_columns,
                  rank_columns * sizeof(float));
    }
    block += rows * rank_columns;
    first_column += rank_columns;
  }
  return frame.Bind(op->getResult(0), std::move(gathered));
}

template <typename OpT>
struct DistReferenceModel
    : ReferenceEvaluableOpInterface::ExternalModel<DistReferenceModel<OpT>, OpT> {
  absl::Status evaluateReference(mlir::Operation* op, ReferenceFrame& frame) const {
    return Evaluate(mlir::cast<OpT>(op), frame);
  }
};

}  // namespace

void RegisterDistReferenceModels(mlir::DialectRegistry& registry) {
  registry.addExtension(+[](mlir::MLIRContext* context, dist::DistDialect*) {
    dist::AllReduceOp::attachInterface<DistReferenceModel<dist::AllReduceOp>>(*context);
    dist::AllGatherOp::attachInterface<DistReferenceModel<dist::AllGatherOp>>(*context);
  });
}

}  // namespace kvjit::reference
