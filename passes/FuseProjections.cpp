// fuse-projections: the linears that read one input (Q, K and V of an
// attention; gate and up of a SwiGLU) become one linear over their weights'
// rows concatenated, split back by column views. The contract is in
// Passes.td.

#include <cstdint>
#include <string>
#include <tuple>

#include "ir/Tfm/TfmOps.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/STLExtras.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"
#include "passes/Passes.h"

namespace kvjit {
#define GEN_PASS_DEF_FUSEPROJECTIONS
#include "passes/Passes.h.inc"

namespace {

using mlir::RankedTensorType;

// A linear whose weight can join a concatenation, with what it reads.
struct Projection {
  tfm::LinearOp linear;
  tfm::WeightOp weight;
  tfm::ParamOp param;
};

// The linears of one block that read one input, of one storage type, in
// program order.
using GroupKey = std::tuple<mlir::Block*, mlir::Value, tfm::StorageType>;

std::optional<Projection> AsProjection(tfm::LinearOp linear, mlir::SymbolTable& symbols) {
  if (linear.getBias()) return std::nullopt;
  auto weight = linear.getWeight().getDefiningOp<tfm::WeightOp>();
  // Another reader of the weight value would still need it whole.
  if (!weight || !weight.getResult().hasOneUse()) return std::nullopt;
  auto param = symbols.lookup<tfm::ParamOp>(weight.getParam());
  if (!param || param.getConcat()) return std::nullopt;
  if (mlir::cast<RankedTensorType>(param.getType()).getRank() != 2) return std::nullopt;
  return Projection{linear, weight, param};
}

// "blk.0.attn_q.weight+attn_k.weight+attn_v.weight": the parts' common
// prefix up to its last '.', then the rest of each name.
std::string FusedName(llvm::ArrayRef<Projection> parts) {
  Projection front = parts.front();
  llvm::StringRef first = front.param.getSymName();
  size_t common = first.size();
  for (Projection part : parts) {
    llvm::StringRef name = part.param.getSymName();
    size_t same = 0;
    while (same < common && same < name.size() && name[same] == first[same]) ++same;
    common = same;
  }
  const size_t dot = first.substr(0, common).rfind('.');
  const size_t prefix = dot == llvm::StringRef::npos ? 0 : dot + 1;
  std::string name = first.substr(0, prefix).str();
  for (size_t index = 0; index < parts.size(); ++index) {
    if (index > 0) name += "+";
    Projection part = parts[index];
    name += part.param.getSymName().substr(prefix).str();
  }
  return name;
}

tfm::ParamOp AddFusedParam(llvm::ArrayRef<Projection> parts, mlir::SymbolTable& symbols) {
  Projection front = parts.front();
  tfm::ParamOp last = front.param;
  llvm::SmallVector<mlir::Attribute> names;
  int64_t rows = 0;
  for (Projection part : parts) {
    if (last->isBeforeInBlock(part.param)) last = part.param;
    names.push_back(mlir::FlatSymbolRefAttr::get(part.param.getSymNameAttr()));
    rows += mlir::cast<RankedTensorType>(part.param.getType()).getDimSize(0);
  }
  auto part_type = mlir::cast<RankedTensorType>(front.param.getType());
  auto type = RankedTensorType::get({rows, part_type.getDimSize(1)}, part_type.getElementType());
  mlir::OpBuilder builder(last->getContext());
  builder.setInsertionPointAfter(last);
  auto param = builder.create<tfm::ParamOp>(
      last.getLoc(), builder.getStringAttr(FusedName(parts)), mlir::TypeAttr::get(type),
      front.param.getStorageAttr(), builder.getArrayAttr(names));
  // Renames the param where its name is taken.
  symbols.insert(param, builder.getInsertionPoint());
  return param;
}

// One linear over the concatenated weight where the first part was; each
// part's result becomes its columns of the fused result.
void Fuse(llvm::ArrayRef<Projection> parts, mlir::SymbolTable& symbols) {
  tfm::ParamOp param = AddFusedParam(parts, symbols);
  Projection front = parts.front();
  tfm::LinearOp first = front.linear;
  llvm::SmallVector<mlir::Location> locations;
  for (Projection part : parts) locations.push_back(part.linear.getLoc());
  mlir::Location location = mlir::FusedLoc::get(first->getContext(), locations);

  mlir::OpBuilder builder(first);
  auto weight = builder.create<tfm::WeightOp>(location, param.getType(),
                                              mlir::FlatSymbolRefAttr::get(param.getSymNameAttr()));
  auto part_result = mlir::cast<RankedTensorType>(first.getType());
  const int64_t rows = mlir::cast<RankedTensorType>(param.getType()).getDimSize(0);
  auto fused_type = RankedTensorType::get({part_result.getDimSize(0), rows},
                                          part_result.getElementType());
  auto fused = builder.create<tfm::LinearOp>(location, fused_type, first.getInput(),
                                             weight.getResult(), mlir::Value());
  int64_t offset = 0;
  for (Projection part : parts) {
    const int64_t size = mlir::cast<RankedTensorType>(part.param.getType()).getDimSize(0);
    auto slice = builder.create<tfm::SliceColumnsOp>(
        part.linear.getLoc(), part.linear.getType(), fused.getResult(),
        builder.getI64IntegerAttr(offset), builder.getI64IntegerAttr(size));
    part.linear.getResult().replaceAllUsesWith(slice.getResult());
    offset += size;
  }
  for (Projection part : parts) {
    part.linear->erase();
    part.weight->erase();
  }
}

class FuseProjectionsPass : public impl::FuseProjectionsBase<FuseProjectionsPass> {
 public:
  void runOnOperation() override {
    mlir::ModuleOp module = getOperation();
    mlir::SymbolTable symbols(module);
    llvm::MapVector<GroupKey, llvm::SmallVector<Projection>> groups;
    module.walk([&](tfm::LinearOp linear) {
      std::optional<Projection> projection = AsProjection(linear, symbols);
      if (!projection) return;
      GroupKey key{linear->getBlock(), linear.getInput(), projection->param.getStorage()};
      groups[key].push_back(*projection);
    });
    for (auto& [key, parts] : groups) {
      if (parts.size() < 2) continue;
      // walk() visits a block's ops in order, so the first part comes first.
      Fuse(parts, symbols);
    }
  }
};

}  // namespace
}  // namespace kvjit
