#ifndef KVJIT_IR_DIST_DISTOPS_H_
#define KVJIT_IR_DIST_DISTOPS_H_

#include "ir/Dist/DistDialect.h"
#include "ir/Tfm/TfmTraits.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"

#define GET_OP_CLASSES
#include "ir/Dist/DistOps.h.inc"

#endif  // KVJIT_IR_DIST_DISTOPS_H_
