#ifndef KVJIT_CODEGEN_LOWERING_EXECUTABLELOWERABLEOPINTERFACE_TD
#define KVJIT_CODEGEN_LOWERING_EXECUTABLELOWERABLEOPINTERFACE_TD

include "mlir/IR/OpBase.td"

def ExecutableLowerableOpInterface : OpInterface<"ExecutableLowerableOpInterface"> {
  let cppNamespace = "::kvjit::codegen";
  let description = [{
    An op of a planned step function that the executable writer can lower:
    the instructions (or the weight and view references) that compute it in
    a .kvx program. The dialects do not depend on the executable's schema,
    so each dialect's ops get their lowering as external models, in one file
    per dialect beside this interface (TfmLowering.cpp, KvLowering.cpp,
    KernelLowering.cpp), attached by EnsureLoweringModels.
  }];
  let methods = [
    InterfaceMethod<[{
        Appends the op's instructions to the program through `emitter`, which
        holds what all ops share (tensor references, arena offsets, the
        FlatBuffers builder); an error names the op and what does not fit.
      }],
      "::absl::Status", "lowerToExecutable",
      (ins "::kvjit::codegen::InstructionEmitter&":$emitter)>,
  ];
}

def ElementwiseStepOpInterface : OpInterface<"ElementwiseStepOpInterface"> {
  let cppNamespace = "::kvjit::codegen";
  let description = [{
    An elementwise op as one step of an Elementwise instruction's chain
    (kvx.fbs ElementwiseStep): how an elementwise fusion's body, and the op
    outside any fusion, are encoded.
  }];
  let methods = [
    InterfaceMethod<[{
        The op's step over chain operands `lhs` and `rhs` (a unary op reads
        `lhs` alone and repeats it as `rhs`).
      }],
      "::kvjit::kvx::ElementwiseStep", "getElementwiseStep",
      (ins "int32_t":$lhs, "int32_t":$rhs)>,
  ];
}

#endif  // KVJIT_CODEGEN_LOWERING_EXECUTABLELOWERABLEOPINTERFACE_TD
