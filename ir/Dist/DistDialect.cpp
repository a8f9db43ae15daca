#include "ir/Dist/DistDialect.h"

#include "ir/Dist/DistOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

#include "ir/Dist/DistDialect.cpp.inc"

namespace kvjit::dist {

void DistDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "ir/Dist/DistOps.cpp.inc"
      >();
}

}  // namespace kvjit::dist
