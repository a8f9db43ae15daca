#include "ir/Kernel/KernelDialect.h"

#include "ir/Kernel/KernelOps.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/MathExtras.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"

#include "ir/Kernel/KernelDialect.cpp.inc"
#include "ir/Kernel/KernelEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "ir/Kernel/KernelAttrs.cpp.inc"

namespace kvjit::kernel {

void KernelDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "ir/Kernel/KernelOps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "ir/Kernel/KernelAttrs.cpp.inc"
      >();
}

mlir::LogicalResult ArenaAttr::verify(llvm::function_ref<mlir::InFlightDiagnostic()> emitError,
                                      int64_t bytes, int64_t naive_bytes, int64_t max_tokens,
                                      int64_t alignment) {
  if (bytes < 0 || naive_bytes < 0) return emitError() << "arena sizes must not be negative";
  if (max_tokens <= 0) return emitError() << "arena max_tokens must be positive";
  if (alignment <= 0 || !llvm::isPowerOf2_64(alignment)) {
    return emitError() << "arena alignment must be a power of two, got " << alignment;
  }
  return mlir::success();
}

}  // namespace kvjit::kernel
