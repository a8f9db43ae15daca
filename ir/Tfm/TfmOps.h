#ifndef KVJIT_IR_TFM_TFMOPS_H_
#define KVJIT_IR_TFM_TFMOPS_H_

#include "ir/Tfm/TfmAttrs.h"
#include "ir/Tfm/TfmDialect.h"
#include "ir/Tfm/TfmTraits.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#define GET_OP_CLASSES
#include "ir/Tfm/TfmOps.h.inc"

#endif  // KVJIT_IR_TFM_TFMOPS_H_
