#ifndef KVJIT_IR_KV_KVOPS_H_
#define KVJIT_IR_KV_KVOPS_H_

#include "ir/Kv/KvDialect.h"
#include "ir/Kv/KvTypes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#define GET_OP_CLASSES
#include "ir/Kv/KvOps.h.inc"

#endif  // KVJIT_IR_KV_KVOPS_H_
