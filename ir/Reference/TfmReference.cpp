// The reference evaluation of each tfm op that a function body holds (not
// tfm.param, a module-level declaration): a new op's semantics goes here, as
// an Evaluate overload and an entry in RegisterTfmReferenceModels. Math of
// one expression (tfm.tanh) is written here, over MapInDouble; longer math
// is a function of RefKernels.

#include <cmath>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ir/Reference/RefKernels.h"
#include "ir/Reference/ReferenceEvaluableOpInterface.h"
#include "ir/Tfm/TfmDialect.h"
#include "ir/Tfm/TfmOps.h"
#include "runtime/core/StatusMacros.h"

namespace kvjit::reference {
namespace {

RopeParams RopeParamsOf(tfm::RopeOp op) {
  RopeParams params;
  params.pairing = op.getStyle() == tfm::RopeStyle::neox ? RopePairing::kNeox
                                                         : RopePairing::kInterleaved;
  params.theta = op.getTheta().convertToFloat();
  if (op.getRotaryDimAttr()) params.rotary_dim = op.getRotaryDimAttr().getInt();
  if (tfm::RopeScalingAttr scaling = op.getScalingAttr()) {
    params.scaling.kind = scaling.getKind() == tfm::RopeScalingKind::linear
                              ? ::kvjit::RopeScalingKind::kLinear
                              : ::kvjit::RopeScalingKind::kLlama3;
    params.scaling.factor = scaling.getFactor().convertToDouble();
    params.scaling.low_freq_factor = scaling.getLowFreqFactor().convertToDouble();
    params.scaling.high_freq_factor = scaling.getHighFreqFactor().convertToDouble();
    params.scaling.original_context = scaling.getOriginalContext();
  }
  if (std::optional<llvm::ArrayRef<float>> factors = op.getFreqFactors()) {
    params.freq_factors.assign(factors->begin(), factors->end());
  }
  return params;
}

// Binds the op's one result to what its kernel computed.
absl::Status BindResult(mlir::Operation* op, ReferenceFrame& frame,
                        absl::StatusOr<RefTensor> computed) {
  if (!computed.ok()) return computed.status();
  return frame.Bind(op->getResult(0), *std::move(computed));
}

absl::Status Evaluate(tfm::WeightOp weight, ReferenceFrame& frame) {
  KVJIT_ASSIGN_OR_RETURN(const RefTensor* loaded, frame.LoadWeight(weight));
  return frame.BindAlias(weight->getResult(0), *loaded);
}

absl::Status Evaluate(tfm::EmbeddingOp op, ReferenceFrame& frame) {
  return BindResult(op, frame, Embedding(frame.Get(op.getTable()), frame.Get(op.getTokens())));
}

absl::Status Evaluate(tfm::LinearOp op, ReferenceFrame& frame) {
  return BindResult(op, frame, Linear(frame.Get(op.getInput()), frame.Get(op.getWeight()),
                                      frame.GetOptional(op.getBias())));
}

absl::Status Evaluate(tfm::RmsNormOp op, ReferenceFrame& frame) {
  return BindResult(op, frame, RmsNorm(frame.Get(op.getInput()), frame.Get(op.getWeight()),
                                       op.getEpsilon().convertToFloat()));
}

absl::Status Evaluate(tfm::LayerNormOp op, ReferenceFrame& frame) {
  return BindResult(op, frame,
                    LayerNorm(frame.Get(op.getInput()), frame.Get(op.getWeight()),
                              frame.GetOptional(op.getBias()), op.getEpsilon().convertToFloat()));
}

absl::Status Evaluate(tfm::RopeOp op, ReferenceFrame& frame) {
  return BindResult(op, frame,
                    Rope(frame.Get(op.getInput()), frame.Get(op.getPositions()), RopeParamsOf(op)));
}

absl::Status Evaluate(tfm::MatmulOp op, ReferenceFrame& frame) {
  return BindResult(op, frame, Matmul(frame.Get(op.getLhs()), frame.Get(op.getRhs())));
}

absl::Status Evaluate(tfm::TransposeOp op, ReferenceFrame& frame) {
  return BindResult(op, frame,
                    Transpose(frame.Get(op.getInput()),
                              std::vector<int64_t>(op.getPermutation().begin(),
                                                   op.getPermutation().end())));
}

absl::Status Evaluate(tfm::ReshapeOp op, ReferenceFrame& frame) {
  auto type = mlir::cast<mlir::RankedTensorType>(op.getType());
  std::vector<int64_t> shape(type.getShape().begin(), type.getShape().end());
  for (int64_t& dim : shape) {
    if (mlir::ShapedType::isDynamic(dim)) dim = -1;
  }
  return BindResult(op, frame, Reshape(frame.Get(op.getInput()), shape));
}

absl::Status Evaluate(tfm::SliceColumnsOp op, ReferenceFrame& frame) {
  return BindResult(op, frame, SliceColumns(frame.Get(op.getInput()), op.getOffset(), op.getSize()));
}

absl::Status Evaluate(tfm::GatherRowsOp op, ReferenceFrame& frame) {
  return BindResult(op, frame, GatherRows(frame.Get(op.getInput()), frame.Get(op.getRows())));
}

absl::Status Evaluate(tfm::RepeatOp op, ReferenceFrame& frame) {
  return BindResult(op, frame, Repeat(frame.Get(op.getInput()), op.getAxisAttr().getInt(),
                                      op.getRepeatsAttr().getInt()));
}

// A sliding window attribute's positions; 0 where there is none.
int64_t WindowOf(mlir::IntegerAttr window) { return window ? window.getInt() : 0; }

// A softcap attribute's cap; 0 where there is none.
double SoftcapOf(mlir::FloatAttr softcap) { return softcap ? softcap.getValueAsDouble() : 0.0; }

absl::Status Evaluate(tfm::AttentionOp op, ReferenceFrame& frame) {
  return BindResult(op, frame,
                    Attention(frame.Get(op.getQuery()), frame.Get(op.getKey()),
                              frame.Get(op.getValue()), op.getScale().convertToFloat(),
                              op.getCausal(), WindowOf(op.getWindowAttr()),
                              SoftcapOf(op.getSoftcapAttr())));
}

absl::Status Evaluate(tfm::AddOp op, ReferenceFrame& frame) {
  return BindResult(op, frame, Add(frame.Get(op.getLhs()), frame.Get(op.getRhs())));
}

absl::Status Evaluate(tfm::MulOp op, ReferenceFrame& frame) {
  return BindResult(op, frame, Mul(frame.Get(op.getLhs()), frame.Get(op.getRhs())));
}

absl::Status Evaluate(tfm::ScaleOp op, ReferenceFrame& frame) {
  return BindResult(op, frame, Scale(frame.Get(op.getInput()), op.getFactor().convertToFloat()));
}

absl::Status Evaluate(tfm::SiluOp op, ReferenceFrame& frame) {
  return BindResult(op, frame, Silu(frame.Get(op.getInput())));
}

absl::Status Evaluate(tfm::GeluOp op, ReferenceFrame& frame) {
  return BindResult(op, frame, Gelu(frame.Get(op.getInput()), op.getApproximateTanh()));
}

absl::Status Evaluate(tfm::TanhOp op, ReferenceFrame& frame) {
  return BindResult(op, frame,
                    MapInDouble(frame.Get(op.getInput()), [](double x) { return std::tanh(x); }));
}

absl::Status Evaluate(tfm::SoftmaxOp op, ReferenceFrame& frame) {
  return BindResult(op, frame, Softmax(frame.Get(op.getInput()), op.getAxisAttr().getInt()));
}

absl::Status Evaluate(tfm::CausalMaskOp op, ReferenceFrame& frame) {
  return BindResult(op, frame,
                    CausalMask(frame.Get(op.getInput()), WindowOf(op.getWindowAttr())));
}

template <typename OpT>
struct TfmReferenceModel
    : ReferenceEvaluableOpInterface::ExternalModel<TfmReferenceModel<OpT>, OpT> {
  absl::Status evaluateReference(mlir::Operation* op, ReferenceFrame& frame) const {
    return Evaluate(mlir::cast<OpT>(op), frame);
  }
};

template <typename... OpTs>
void Attach(mlir::MLIRContext& context) {
  (OpTs::template attachInterface<TfmReferenceModel<OpTs>>(context), ...);
}

}  // namespace

void RegisterTfmReferenceModels(mlir::DialectRegistry& registry) {
  registry.addExtension(+[](mlir::MLIRContext* context, tfm::TfmDialect*) {
    Attach<tfm::WeightOp, tfm::EmbeddingOp, tfm::LinearOp, tfm::RmsNormOp, tfm::LayerNormOp,
           tfm::RopeOp, tfm::MatmulOp, tfm::TransposeOp, tfm::ReshapeOp,
           tfm::SliceColumnsOp, tfm::GatherRowsOp, tfm::RepeatOp, tfm::AttentionOp, tfm::AddOp,
           tfm::MulOp, tfm::ScaleOp, tfm::SiluOp, tfm::GeluOp, tfm::TanhOp, tfm::SoftmaxOp,
           tfm::CausalMaskOp>(*context);
  });
}

}  // namespace kvjit::reference
