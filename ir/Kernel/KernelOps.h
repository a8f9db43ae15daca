#ifndef KVJIT_IR_KERNEL_KERNELOPS_H_
#define KVJIT_IR_KERNEL_KERNELOPS_H_

#include "ir/Kernel/KernelDialect.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "ir/Kernel/KernelEnums.h.inc"

#define GET_OP_CLASSES
#include "ir/Kernel/KernelOps.h.inc"

namespace kvjit::kernel {

// Ops each of whose output elements depends only on the input elements at the
// same index (and on the index): tfm.add, mul, scale, silu, gelu, causal_mask.
bool IsElementwiseOp(mlir::Operation* op);

// Ops each of whose output rows depends only on the same input row:
// tfm.rms_norm (over the features) and tfm.rope (over each token's heads).
bool IsRowWiseOp(mlir::Operation* op);

}  // namespace kvjit::kernel

#endif  // KVJIT_IR_KERNEL_KERNELOPS_H_
