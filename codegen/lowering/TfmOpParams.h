#ifndef KVJIT_CODEGEN_LOWERING_TFMOPPARAMS_H_
#define KVJIT_CODEGEN_LOWERING_TFMOPPARAMS_H_

#include <vector>

#include "absl/status/status.h"
#include "codegen/lowering/ExecutableLowerableOpInterface.h"
#include "codegen/lowering/InstructionEmitter.h"
#include "runtime/schema/kvx_generated.h"

// What the tfm ops that lower both alone and inside a fusion share between
// TfmLowering.cpp and KernelLowering.cpp.
namespace kvjit::codegen {

// Appends the instruction of row-wise `op`'s kernel for `at` (the op itself,
// or its fusion), writing `at`'s results. `inputs` are the op's operands as
// `at` reads them; where `after_residual_add`, the residual add's two
// operands take the place of operand 0 and the first result is the sum.
absl::Status EmitRowKernel(mlir::Operation* at, RowKernelOpInterface op, bool after_residual_add,
                           const std::vector<mlir::Value>& inputs, InstructionEmitter& emitter);

InstructionParams ElementwiseChainParams(const std::vector<kvx::ElementwiseStep>& steps,
                                         flatbuffers::FlatBufferBuilder& builder);

}  // namespace kvjit::codegen

#endif  // KVJIT_CODEGEN_LOWERING_TFMOPPARAMS_H_
