#ifndef KVJIT_IR_KV_KVTYPES_H_
#define KVJIT_IR_KV_KVTYPES_H_

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Types.h"

#define GET_TYPEDEF_CLASSES
#include "ir/Kv/KvTypes.h.inc"

#endif  // KVJIT_IR_KV_KVTYPES_H_
