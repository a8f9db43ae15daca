#include "codegen/lowering/TfmOpParams.h"

#include <cstdint>
#include <optional>

namespace kvjit::codegen {

InstructionParams RmsNormParamsOf(tfm::RmsNormOp norm, flatbuffers::FlatBufferBuilder& builder) {
  return {kvx::OpParams::RmsNormParams,
          kvx::CreateRmsNormParams(builder, ToF32(norm.getEpsilon())).Union()};
}

InstructionParams RopeParamsOf(tfm::RopeOp rope, flatbuffers::FlatBufferBuilder& builder) {
  auto type = mlir::cast<mlir::RankedTensorType>(rope.getInput().getType());
  const int64_t rotary_dim = rope.getRotaryDim() ? static_cast<int64_t>(*rope.getRotaryDim())
                                                 : type.getShape().back();
  flatbuffers::Offset<kvx::RopeScaling> scaling = 0;
  if (tfm::RopeScalingAttr attr = rope.getScalingAttr()) {
    scaling = kvx::CreateRopeScaling(
        builder,
        attr.getKind() == tfm::RopeScalingKind::linear ? kvx::RopeScalingKind::Linear
                                                       : kvx::RopeScalingKind::Llama3,
        ToF32(attr.getFactor()), ToF32(attr.getLowFreqFactor()), ToF32(attr.getHighFreqFactor()),
        static_cast<uint32_t>(attr.getOriginalContext()));
  }
  flatbuffers::Offset<flatbuffers::Vector<float>> freq_factors = 0;
  if (std::optional<llvm::ArrayRef<float>> factors = rope.getFreqFactors()) {
    freq_factors = builder.CreateVector(factors->data(), factors->size());
  }
  const kvx::RopeStyle style =
      rope.getStyle() == tfm::RopeStyle::neox ? kvx::RopeStyle::NeoX : kvx::RopeStyle::Interleaved;
  return {kvx::OpParams::RopeParams,
          kvx::CreateRopeParams(builder, style, ToF32(rope.getTheta()),
                                static_cast<uint32_t>(rotary_dim), scaling, freq_factors)
              .Union()};
}

InstructionParams ElementwiseChainParams(const std::vector<kvx::ElementwiseStep>& steps,
                                         flatbuffers::FlatBufferBuilder& builder) {
  return {kvx::OpParams::ElementwiseParams,
          kvx::CreateElementwiseParamsDirect(builder, &steps).Union()};
}

}  // namespace kvjit::codegen
