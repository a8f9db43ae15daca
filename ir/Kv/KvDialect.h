#ifndef KVJIT_IR_KV_KVDIALECT_H_
#define KVJIT_IR_KV_KVDIALECT_H_

#include "mlir/IR/Dialect.h"

#include "ir/Kv/KvDialect.h.inc"

#endif  // KVJIT_IR_KV_KVDIALECT_H_
