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

#endif  // KVJIT_IR_KERNEL_KERNELOPS_H_
