#ifndef KVJIT_IR_KERNEL_KERNELATTRS_H_
#define KVJIT_IR_KERNEL_KERNELATTRS_H_

#include "mlir/IR/Attributes.h"
#include "mlir/IR/BuiltinAttributes.h"

#define GET_ATTRDEF_CLASSES
#include "ir/Kernel/KernelAttrs.h.inc"

#endif  // KVJIT_IR_KERNEL_KERNELATTRS_H_
