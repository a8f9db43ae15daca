#ifndef KVJIT_CODEGEN_LOWERING_TFMOPPARAMS_H_
#define KVJIT_CODEGEN_LOWERING_TFMOPPARAMS_H_

#include <vector>

#include "codegen/lowering/InstructionEmitter.h"
#include "ir/Tfm/TfmOps.h"
#include "runtime/schema/kvx_generated.h"

// The parameter tables of the tfm ops that lower both alone and inside a
// fusion (TfmLowering.cpp and KernelLowering.cpp build the same table).
namespace kvjit::codegen {

InstructionParams RmsNormParamsOf(tfm::RmsNormOp norm, flatbuffers::FlatBufferBuilder& builder);
InstructionParams RopeParamsOf(tfm::RopeOp rope, flatbuffers::FlatBufferBuilder& builder);
InstructionParams ElementwiseChainParams(const std::vector<kvx::ElementwiseStep>& steps,
                                         flatbuffers::FlatBufferBuilder& builder);

}  // namespace kvjit::codegen

#endif  // KVJIT_CODEGEN_LOWERING_TFMOPPARAMS_H_
