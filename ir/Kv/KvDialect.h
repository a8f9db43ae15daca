#ifndef KVJIT_IR_KV_KVDIALECT_H_
#define KVJIT_IR_KV_KVDIALECT_H_

#include "ir/Kv/KvAttrs.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/Operation.h"

#include "ir/Kv/KvDialect.h.inc"

#endif  // KVJIT_IR_KV_KVDIALECT_H_
