#include "codegen/lowering/InstructionEmitter.h"

#include "absl/strings/str_cat.h"
#include "llvm/Support/raw_ostream.h"

namespace kvjit::codegen {

std::string DescribeOp(mlir::Operation* op) {
  std::string location;
  llvm::raw_string_ostream stream(location);
  stream << op->getLoc();
  return absl::StrCat("'", op->getName().getStringRef().str(), "' at ", location);
}

float ToF32(llvm::APFloat value) {
  bool loses_info = false;
  value.convert(llvm::APFloat::IEEEsingle(), llvm::APFloat::rmNearestTiesToEven, &loses_info);
  return value.convertToFloat();
}

}  // namespace kvjit::codegen
