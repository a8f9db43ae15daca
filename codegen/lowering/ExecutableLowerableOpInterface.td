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

def RowKernelOpInterface : OpInterface<"RowKernelOpInterface"> {
  let cppNamespace = "::kvjit::codegen";
  let description = [{
    A row-wise op (tfm class `RowWise`) as the instruction of its own
    kernel: its opcode, inputs and parameter table. The inputs are the op's
    operands, named by its opcode (runtime/schema/OpOperands.h); after a
    fused residual add (`FusesResidualAdd`), the add's two operands take the
    place of operand 0 and the instruction also writes the sum, before the
    op's result. One generic lowering serves the op alone and in its
    `row_wise` fusion.
  }];
  let methods = [
    InterfaceMethod<[{
        The opcode of the op's kernel; of the kernel that first adds the
        residual where `afterResidualAdd` (none where the op fuses no add).
      }],
      "::std::optional<::kvjit::kvx::OpCode>", "getKernelOpcode",
      (ins "bool":$afterResidualAdd)>,
    InterfaceMethod<[{
        The kernel's inputs in the order of its opcode's operands
        (runtime/schema/OpOperands.h): the op's operands or, where
        `residualAdd` is not null, that add's two in place of the op's
        first, for the kernel that adds them first.
      }],
      "::std::vector<::mlir::Value>", "getKernelInputs",
      (ins "::kvjit::tfm::AddOp":$residualAdd)>,
    InterfaceMethod<[{
        The op's parameter table (kvx.fbs OpParams), built in `builder`.
      }],
      "::kvjit::codegen::InstructionParams", "buildKernelParams",
      (ins "::flatbuffers::FlatBufferBuilder&":$builder)>,
  ];
}

#endif  // KVJIT_CODEGEN_LOWERING_EXECUTABLELOWERABLEOPINTERFACE_TD
