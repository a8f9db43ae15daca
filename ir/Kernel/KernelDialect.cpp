#include "ir/Kernel/KernelDialect.h"

#include "ir/Kernel/KernelOps.h"

#include "ir/Kernel/KernelDialect.cpp.inc"
#include "ir/Kernel/KernelEnums.cpp.inc"

namespace kvjit::kernel {

void KernelDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "ir/Kernel/KernelOps.cpp.inc"
      >();
}

}  // namespace kvjit::kernel
