#ifndef KVJIT_IR_REFERENCE_REFERENCEEVALUABLEOPINTERFACE_TD
#define KVJIT_IR_REFERENCE_REFERENCEEVALUABLEOPINTERFACE_TD

include "mlir/IR/OpBase.td"

def ReferenceEvaluableOpInterface : OpInterface<"ReferenceEvaluableOpInterface"> {
  let cppNamespace = "::kvjit::reference";
  let description = [{
    An op the reference evaluator can run: its semantics on reference
    tensors (f32 storage, double accumulation), following the op's ODS
    description literally. The dialects do not depend on the evaluator, so
    each dialect's ops get their implementation as external models, in one
    file per dialect beside the evaluator (TfmReference.cpp, KvReference.cpp,
    KernelReference.cpp), attached by RegisterReferenceModels.
  }];
  let methods = [
    InterfaceMethod<[{
        Reads the op's operands from `frame`, computes the op, and binds its
        results in `frame`; an error names the op and what does not fit.
      }],
      "::absl::Status", "evaluateReference",
      (ins "::kvjit::reference::ReferenceFrame&":$frame)>,
  ];
}

#endif  // KVJIT_IR_REFERENCE_REFERENCEEVALUABLEOPINTERFACE_TD
