#ifndef KVJIT_CODEGEN_LOWERING_TFMOPPARAMS_H_
#define KVJIT_CODEGEN_LOWERING_TFMOPPARAMS_H_

#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "codegen/lowering/ExecutableLowerableOpInterface.h"
#include "codegen/lowering/InstructionEmitter.h"
#include "runtime/schema/kvx_generated.h"

// What the tfm ops that lower both alone and inside a fusion share between
// TfmLowering.cpp and KernelLowering.cpp.
namespace kvjit::codegen {

// Appends the instruction of row-wise `op`'s kernel for `at` (the op itself,
// or its fusion), writing `at`'s results: after `residual_add` where that is
// not null, whose sum is the first result. `outer` gives, for each value
// the kernel reads, the value `at` reads (the same one for the op itself).
absl::Status EmitRowKernel(mlir::Operation* at, RowKernelOpInterface op, tfm::AddOp residual_add,
                           absl::FunctionRef<absl::StatusOr<mlir::Value>(mlir::Value)> outer,
                           InstructionEmitter& emitter);

InstructionParams ElementwiseChainParams(const std::vector<kvx::ElementwiseStep>& steps,
                                         flatbuffers::FlatBufferBuilder& builder);

}  // namespace kvjit::codegen

#endif  // KVJIT_CODEGEN_LOWERING_TFMOPPARAMS_H_
