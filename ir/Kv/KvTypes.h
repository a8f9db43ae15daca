#ifndef KVJIT_IR_KV_KVTYPES_H_
#define KVJIT_IR_KV_KVTYPES_H_

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Types.h"
#include "ir/Kv/KvAttrs.h"

#define GET_TYPEDEF_CLASSES
#include "ir/Kv/KvTypes.h.inc"

namespace kvjit::kvx {
struct KvCacheFormat;
}

namespace kvjit::kv {

// How `element` stores a head's elements (runtime/schema/KvCacheFormat.h).
const kvx::KvCacheFormat& CacheFormat(CacheElement element);

}  // namespace kvjit::kv

#endif  // KVJIT_IR_KV_KVTYPES_H_
