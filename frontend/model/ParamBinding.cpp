#include "frontend/model/ParamBinding.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ir/Tfm/TfmOps.h"
#include "ir/Tfm/TfmStorage.h"
#include "llvm/Support/raw_ostream.h"
#include "mlir/IR/Location.h"

namespace kvjit::model {
namespace {

// "m.mlir:7:3: " for a param parsed from a file; "" where the IR has no
// such location.
std::string Where(mlir::Location location) {
  auto file = mlir::dyn_cast<mlir::FileLineColLoc>(location);
  if (!file) return "";
  return absl::StrCat(file.getFilename().str(), ":", file.getLine(), ":", file.getColumn(), ": ");
}

std::string Describe(mlir::Type type) {
  std::string text;
  llvm::raw_string_ostream stream(text);
  stream << type;
  return text;
}

}  // namespace

absl::Status BindParams(mlir::ModuleOp module, const WeightSource& weights) {
  for (auto param : module.getOps<tfm::ParamOp>()) {
    const std::string name = param.getSymName().str();
    const std::string declared =
        absl::StrCat(Where(param.getLoc()), "tfm.param @", name, " declares ",
                     Describe(param.getType()), " storage <",
                     tfm::stringifyStorageType(param.getStorage()).str(), ">");
    auto type = mlir::cast<mlir::RankedTensorType>(param.getType());
    if (auto parts = param.getConcatAttr()) {
      // fuse-projections' weight: its parts' rows, one after another.
      int64_t rows = 0;
      for (auto part : parts.getAsRange<mlir::FlatSymbolRefAttr>()) {
        // A slice (shard-tensor-parallel's) is checked against its source on
        // its own.
        auto sliced = module.lookupSymbol<tfm::ParamOp>(part);
        if (sliced && sliced.getSliced()) {
          rows += mlir::cast<mlir::RankedTensorType>(sliced.getType()).getDimSize(0);
          continue;
        }
        const WeightInfo* weight = weights.Find(part.getValue().str());
        if (weight == nullptr || weight->shape.size() != 2 ||
            weight->shape[1] != type.getShape().back() ||
            tfm::ToQuantStorage(param.getStorage()) != weight->storage) {
          return absl::InvalidArgumentError(absl::StrCat(
              declared, " as a concatenation of @", part.getValue().str(), ", but ",
              weights.origin(),
              weight == nullptr ? " has no weight of that name"
                                : " stores that part with another shape or storage type"));
        }
        rows += weight->shape[0];
      }
      if (type.getRank() != 2 || type.getShape()[0] != rows) {
        return absl::InvalidArgumentError(
            absl::StrCat(declared, ", but its parts in ", weights.origin(), " have ", rows, " rows"));
      }
      continue;
    }
    // A norm's 1 + w: its source is a tfm.param of its shape (verified),
    // bound on its own.
    if (param.getShifted()) continue;
    // A slice's source is a tfm.param that holds it (verified), bound on its
    // own.
    if (param.getSliced()) continue;
    const WeightInfo* weight = weights.Find(name);
    if (weight == nullptr) {
      return absl::NotFoundError(
          absl::StrCat(declared, ", but ", weights.origin(), " has no weight of that name"));
    }
    if (type.getShape() != llvm::ArrayRef<int64_t>(weight->shape) ||
        tfm::ToQuantStorage(param.getStorage()) != weight->storage) {
      return absl::InvalidArgumentError(absl::StrCat(
          declared, ", but ", weights.origin(), " stores it as [",
          absl::StrJoin(weight->shape, ", "), "] ", quant::StorageTypeName(weight->storage)));
    }
  }
  return absl::OkStatus();
}

}  // namespace kvjit::model
