#ifndef KVJIT_IR_KERNEL_KERNELOPS_TD
#define KVJIT_IR_KERNEL_KERNELOPS_TD

include "ir/Kernel/KernelAttrs.td"
include "ir/Kernel/KernelDialect.td"
include "mlir/IR/EnumAttr.td"
include "mlir/Interfaces/ControlFlowInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def Kernel_FusionKind : I32EnumAttr<"FusionKind",
    "the kernel template that computes a fusion's body", [
  I32EnumAttrCase<"row_wise", 0>,
  I32EnumAttrCase<"swiglu", 1>,
  I32EnumAttrCase<"elementwise", 2>,
]> {
  let cppNamespace = "::kvjit::kernel";
}

def Kernel_FusionOp : Kernel_Op<"fusion", [IsolatedFromAbove, RecursiveMemoryEffects,
    SingleBlockImplicitTerminator<"YieldOp">]> {
  let summary = "tfm ops that run as one kernel";
  let description = [{
    The operands become the arguments of the body's one block, in order; the
    body computes with tfm ops and ends in `kernel.yield` of the results.
    Only ops of the tfm op classes `Elementwise` (`tfm.add`, `tfm.mul`,
    `tfm.scale`, `tfm.silu`, `tfm.gelu`, `tfm.tanh`, `tfm.causal_mask`) and
    `RowWise` (`tfm.rms_norm`, `tfm.layer_norm`, `tfm.rope`), traits defined
    in `ir/Tfm/TfmTraits.td`, may appear: one thread block per row can
    compute any such body without reading another row.

    `kind` names the kernel template codegen instantiates, and the verifier
    holds the body to that template's shape. The templates know no op by
    name but `tfm.add`, `tfm.silu` and `tfm.mul`: a row-wise op says through
    its traits what it fuses with, and its lowering gives its opcode.

    | kind | body | yields |
    |---|---|---|
    | `row_wise` | one row-wise op; or, where the op is `FusesResidualAdd`, `tfm.add` and then the op of the sum | the op's result; the sum (the next residual), then the op's result |
    | `swiglu` | `tfm.silu` of the gate, then `tfm.mul` of it by the up projection | the product |
    | `elementwise` | one or more elementwise ops | any of their values |

    ```mlir
    %sum, %normed = kernel.fusion row_wise(%x, %attn, %w)
        : (tensor<?x64xf32>, tensor<?x64xf32>, tensor<64xf32>)
        -> (tensor<?x64xf32>, tensor<?x64xf32>) {
    ^bb0(%a: tensor<?x64xf32>, %b: tensor<?x64xf32>, %weight: tensor<64xf32>):
      %s = tfm.add %a, %b : tensor<?x64xf32>
      %n = tfm.rms_norm %s, %weight {epsilon = 1.0e-05 : f32} : tensor<?x64xf32>, tensor<64xf32>
      kernel.yield %s, %n : tensor<?x64xf32>, tensor<?x64xf32>
    }
    ```
  }];
  let arguments = (ins Variadic<AnyRankedTensor>:$inputs, Kernel_FusionKind:$kind);
  let results = (outs Variadic<AnyRankedTensor>:$results);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    $kind `(` $inputs `)` attr-dict `:` functional-type($inputs, results) $body
  }];
  let hasRegionVerifier = 1;
}

def Kernel_YieldOp : Kernel_Op<"yield", [Pure, ReturnLike, Terminator,
    HasParent<"FusionOp">]> {
  let summary = "the values a fusion's body returns";
  let arguments = (ins Variadic<AnyRankedTensor>:$values);
  let assemblyFormat = "attr-dict ($values^ `:` type($values))?";
  let builders = [OpBuilder<(ins), [{ /* nothing to yield */ }]>];
}

#endif  // KVJIT_IR_KERNEL_KERNELOPS_TD
