#include "ir/Kv/KvDialect.h"

#include "ir/Kv/KvOps.h"
#include "ir/Kv/KvTypes.h"
#include "llvm/ADT/TypeSwitch.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "runtime/schema/KvCacheFormat.h"

#include "ir/Kv/KvDialect.cpp.inc"
#include "ir/Kv/KvEnums.cpp.inc"

#define GET_TYPEDEF_CLASSES
#include "ir/Kv/KvTypes.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "ir/Kv/KvAttrs.cpp.inc"

namespace kvjit::kv {

void KvDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "ir/Kv/KvOps.cpp.inc"
      >();
  addTypes<
#define GET_TYPEDEF_LIST
#include "ir/Kv/KvTypes.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "ir/Kv/KvAttrs.cpp.inc"
      >();
}

const kvx::KvCacheFormat& CacheFormat(CacheElement element) {
  // Every case of CacheElement names a row of kKvCacheFormats (KvDialect's
  // tests parse each one).
  return *kvx::FindKvCacheFormat(std::string_view(stringifyCacheElement(element)));
}

mlir::LogicalResult LayoutAttr::verify(llvm::function_ref<mlir::InFlightDiagnostic()> emitError,
                                       int64_t block_size, CacheElement key_type,
                                       CacheElement value_type, int64_t block_bytes,
                                       int64_t blocks, int64_t layer_stride_bytes,
                                       int64_t value_offset_bytes, int64_t key_slot_stride_bytes,
                                       int64_t value_slot_stride_bytes) {
  if (block_size <= 0 || block_bytes <= 0 || blocks <= 0 || layer_stride_bytes <= 0 ||
      value_offset_bytes <= 0 || key_slot_stride_bytes <= 0 || value_slot_stride_bytes <= 0) {
    return emitError() << "KV layout sizes and strides must be positive";
  }
  return mlir::success();
}

mlir::LogicalResult CacheType::verify(llvm::function_ref<mlir::InFlightDiagnostic()> emitError,
                                      int64_t layers, int64_t kv_heads, int64_t head_dim,
                                      int64_t block_size, CacheElement key_type,
                                      CacheElement value_type, int64_t key_rotation,
                                      int64_t value_rotation) {
  if (layers <= 0 || kv_heads <= 0 || head_dim <= 0 || block_size <= 0) {
    return emitError() << "cache dimensions must be positive";
  }
  for (auto [role, element] : {std::pair{"keys", key_type}, std::pair{"values", value_type}}) {
    const int64_t block = CacheFormat(element).elements_per_block;
    if (head_dim % block != 0) {
      return emitError() << "a cache of " << stringifyCacheElement(element) << " " << role
                         << " stores each head in blocks of " << block
                         << " elements; head_dim " << head_dim << " is not a multiple of "
                         << block;
    }
  }
  for (auto [role, rotation] : {std::pair{"key", key_rotation}, std::pair{"value", value_rotation}}) {
    if (!kvx::IsValidRotation(rotation, head_dim)) {
      return emitError() << "a " << role << " rotation must be 0 or a power of two dividing head_dim "
                         << head_dim << ", got " << rotation;
    }
  }
  return mlir::success();
}

}  // namespace kvjit::kv
