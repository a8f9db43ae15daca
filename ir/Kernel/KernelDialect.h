#ifndef KVJIT_IR_KERNEL_KERNELDIALECT_H_
#define KVJIT_IR_KERNEL_KERNELDIALECT_H_

#include "ir/Kernel/KernelAttrs.h"
#include "ir/Tfm/TfmDialect.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/Operation.h"

#include "ir/Kernel/KernelDialect.h.inc"

#endif  // KVJIT_IR_KERNEL_KERNELDIALECT_H_
