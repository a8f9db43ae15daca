#include "ir/Tfm/TfmDialect.h"

#include "ir/Tfm/TfmAttrs.h"
#include "ir/Tfm/TfmOps.h"
#include "llvm/ADT/TypeSwitch.h"

#include "ir/Tfm/TfmDialect.cpp.inc"
#include "ir/Tfm/TfmEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "ir/Tfm/TfmAttrs.cpp.inc"

namespace kvjit::tfm {

void TfmDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "ir/Tfm/TfmOps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "ir/Tfm/TfmAttrs.cpp.inc"
      >();
}

mlir::LogicalResult RopeScalingAttr::verify(
    llvm::function_ref<mlir::InFlightDiagnostic()> emitError, RopeScalingKind kind,
    llvm::APFloat factor_value, llvm::APFloat low_freq_value, llvm::APFloat high_freq_value,
    int64_t original_context) {
  double factor = factor_value.convertToDouble();
  double low_freq_factor = low_freq_value.convertToDouble();
  double high_freq_factor = high_freq_value.convertToDouble();
  if (!(factor > 0)) return emitError() << "rope scaling factor must be positive, got " << factor;
  if (kind == RopeScalingKind::llama3) {
    if (!(low_freq_factor > 0) || !(high_freq_factor > low_freq_factor)) {
      return emitError() << "llama3 rope scaling needs 0 < low_freq_factor < high_freq_factor, got "
                         << low_freq_factor << " and " << high_freq_factor;
    }
    if (original_context <= 0) {
      return emitError() << "llama3 rope scaling needs a positive original_context";
    }
  }
  return mlir::success();
}

}  // namespace kvjit::tfm
