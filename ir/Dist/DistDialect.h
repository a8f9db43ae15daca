#ifndef KVJIT_IR_DIST_DISTDIALECT_H_
#define KVJIT_IR_DIST_DISTDIALECT_H_

#include "ir/Tfm/TfmDialect.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/Operation.h"

#include "ir/Dist/DistDialect.h.inc"

#endif  // KVJIT_IR_DIST_DISTDIALECT_H_
