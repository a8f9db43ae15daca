#ifndef KVJIT_IR_KERNEL_KERNELDIALECT_TD
#define KVJIT_IR_KERNEL_KERNELDIALECT_TD

include "mlir/IR/OpBase.td"

def Kernel_Dialect : Dialect {
  let name = "kernel";
  let cppNamespace = "::kvjit::kernel";
  let summary = "The kernel level: which ops run together as one generated kernel";
  let description = [{
    The third IR level of kvjit. `fuse-elementwise` groups the elementwise
    and row-wise tfm ops between the GEMMs (residual add + rms_norm, SwiGLU,
    rope, elementwise chains) into `kernel.fusion` regions; codegen emits one
    kernel per fusion from the template its `kind` names. Matmuls, linears
    and attention stay outside fusions, as library calls.

    A fusion is isolated from above: everything its kernel reads is an
    operand, everything it writes is a result, so codegen and `plan-memory`
    see each kernel's buffers without looking inside.
  }];
  let dependentDialects = ["::kvjit::tfm::TfmDialect"];
  let useDefaultAttributePrinterParser = 1;
  // plan-memory's activation arena: the function's (KernelAttrs.td), and
  // each op's byte offset per result (-1: not in the arena).
  let discardableAttrs = (ins "::kvjit::kernel::ArenaAttr":$arena,
                              "::mlir::DenseI64ArrayAttr":$arena_offsets);
}

class Kernel_Op<string mnemonic, list<Trait> traits = []>
    : Op<Kernel_Dialect, mnemonic, traits>;

#endif  // KVJIT_IR_KERNEL_KERNELDIALECT_TD
