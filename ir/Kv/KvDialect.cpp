#include "ir/Kv/KvDialect.h"

#include "ir/Kv/KvOps.h"
#include "ir/Kv/KvTypes.h"
#include "llvm/ADT/TypeSwitch.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"

#include "ir/Kv/KvDialect.cpp.inc"

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

mlir::LogicalResult LayoutAttr::verify(llvm::function_ref<mlir::InFlightDiagnostic()> emitError,
                                       int64_t block_size, mlir::Type element_type,
                                       int64_t block_bytes, int64_t blocks,
                                       int64_t layer_stride_bytes, int64_t value_offset_bytes,
                                       int64_t slot_stride_bytes) {
  if (block_size <= 0 || block_bytes <= 0 || blocks <= 0 || layer_stride_bytes <= 0 ||
      value_offset_bytes <= 0 || slot_stride_bytes <= 0) {
    return emitError() << "KV layout sizes and strides must be positive";
  }
  if (!element_type.isF32() && !element_type.isF16() && !element_type.isBF16()) {
    return emitError() << "KV layout elements must be f32, f16 or bf16, got " << element_type;
  }
  return mlir::success();
}

mlir::LogicalResult CacheType::verify(llvm::function_ref<mlir::InFlightDiagnostic()> emitError,
                                      int64_t layers, int64_t kv_heads, int64_t head_dim,
                                      int64_t block_size, mlir::Type element_type) {
  if (layers <= 0 || kv_heads <= 0 || head_dim <= 0 || block_size <= 0) {
    return emitError() << "cache dimensions must be positive";
  }
  if (!element_type.isF32() && !element_type.isF16() && !element_type.isBF16()) {
    return emitError() << "cache elements must be f32, f16 or bf16, got " << element_type;
  }
  return mlir::success();
}

}  // namespace kvjit::kv
