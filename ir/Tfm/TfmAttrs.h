#ifndef KVJIT_IR_TFM_TFMATTRS_H_
#define KVJIT_IR_TFM_TFMATTRS_H_

#include "ir/Tfm/RopeScaling.h"
#include "llvm/ADT/APFloat.h"
#include "mlir/IR/Attributes.h"
#include "mlir/IR/DialectImplementation.h"

namespace mlir {
// Lets `struct(params)` assembly formats read floating-point parameters
// (kept in double precision).
template <>
struct FieldParser<llvm::APFloat> {
  static FailureOr<llvm::APFloat> parse(AsmParser& parser) {
    double value = 0;
    if (parser.parseFloat(value)) return failure();
    return llvm::APFloat(value);
  }
};
}  // namespace mlir

#include "ir/Tfm/TfmEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "ir/Tfm/TfmAttrs.h.inc"

#endif  // KVJIT_IR_TFM_TFMATTRS_H_
