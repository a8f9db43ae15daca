#ifndef KVJIT_IR_TFM_TFMDIALECT_H_
#define KVJIT_IR_TFM_TFMDIALECT_H_

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Dialect.h"

#include "ir/Tfm/TfmDialect.h.inc"

#endif  // KVJIT_IR_TFM_TFMDIALECT_H_
