#ifndef KVJIT_IR_KV_KVATTRS_H_
#define KVJIT_IR_KV_KVATTRS_H_

#include "mlir/IR/Attributes.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Types.h"

#include "ir/Kv/KvEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "ir/Kv/KvAttrs.h.inc"

#endif  // KVJIT_IR_KV_KVATTRS_H_
