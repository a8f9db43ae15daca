#include "ir/Reference/ReferenceEvaluator.h"

#include "absl/container/flat_hash_map.h"
#include "absl/container/node_hash_map.h"
#include "absl/strings/str_cat.h"
#include "ir/Kv/KvTypes.h"
#include "ir/Reference/RefKernels.h"
#include "ir/Reference/ReferenceEvaluableOpInterface.h"
#include "ir/Reference/ReferenceFrame.h"
#include "ir/Tfm/TfmOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/SymbolTable.h"
#include "runtime/core/StatusMacros.h"

namespace kvjit::reference {
namespace {

// An attention's `window` attribute; 0 where it has none.
std::string OpName(mlir::Operation* op) { return op->getName().getStringRef().str(); }

// Runs one function body; values live in `env` until the function returns.
// Each op evaluates itself (ReferenceEvaluableOpInterface) through this frame.
class Interpreter : public ReferenceFrame {
 public:
  Interpreter(WeightProvider& weights, RefKvCache* cache,
              runtime::dist::Communicator* communicator,
              absl::node_hash_map<std::string, RefTensor>& derived)
      : weights_(weights), cache_(cache), communicator_(communicator), derived_(derived) {}

  absl::StatusOr<std::vector<RefTensor>> Run(mlir::func::FuncOp function,
                                             std::vector<RefTensor> arguments);

  const RefTensor& Get(mlir::Value value) override {
    auto alias = aliases_.find(value.getAsOpaquePointer());
    return alias != aliases_.end() ? *alias->second : env_.at(value.getAsOpaquePointer());
  }
  absl::Status Bind(mlir::OpResult result, RefTensor tensor) override;
  absl::Status BindAlias(mlir::OpResult result, const RefTensor& tensor) override;
  // The provider's values; for a concatenation, its parts' rows one after
  // the other; for a shifted weight, the shift plus its source's values.
  absl::StatusOr<const RefTensor*> LoadWeight(tfm::WeightOp weight) override;
  absl::StatusOr<RefKvCache*> Cache(mlir::Operation* op) override {
    if (cache_ != nullptr) return cache_;
    return absl::FailedPreconditionError(absl::StrCat(OpName(op), " needs a KV cache"));
  }
  absl::StatusOr<runtime::dist::Communicator*> Communicator(mlir::Operation* op) override {
    if (communicator_ != nullptr) return communicator_;
    return absl::FailedPreconditionError(absl::StrCat(
        OpName(op), " meets the other tensor-parallel ranks, and this program is evaluated "
                    "alone: evaluate every rank's program together, each with its communicator"));
  }
  absl::StatusOr<std::vector<RefTensor>> RunBlock(mlir::Block& block,
                                                  mlir::ValueRange inputs) override;

 private:
  // Runs `block`'s ops in order and returns the values its terminator
  // (func.return or kernel.yield) passes on.
  absl::StatusOr<std::vector<RefTensor>> RunOps(mlir::Block& block);
  // A param's values: the provider's for a model weight, made once and kept
  // for a weight the compiler makes.
  absl::StatusOr<const RefTensor*> LoadParam(tfm::ParamOp param);
  absl::Status CheckAgainstType(mlir::Operation* op, mlir::Type type, const RefTensor& tensor);

  WeightProvider& weights_;
  RefKvCache* cache_;
  runtime::dist::Communicator* communicator_;
  absl::node_hash_map<std::string, RefTensor>& derived_;
  // Node-based: references handed out by Get() stay valid while values are added.
  absl::node_hash_map<const void*, RefTensor> env_;
  // Values that are other tensors, not copies of them: weights (the
  // provider keeps them) and a block's arguments (its inputs). A model's
  // weights are hundreds of MB; copying them per evaluation cost most of it.
  absl::flat_hash_map<const void*, const RefTensor*> aliases_;
};

absl::Status Interpreter::CheckAgainstType(mlir::Operation* op, mlir::Type type,
                                           const RefTensor& tensor) {
  auto ranked = mlir::dyn_cast<mlir::RankedTensorType>(type);
  bool matches = ranked && ranked.getRank() == static_cast<int64_t>(tensor.shape.size());
  for (int64_t i = 0; matches && i < ranked.getRank(); ++i) {
    matches = ranked.isDynamicDim(i) || ranked.getDimSize(i) == tensor.shape[i];
  }
  if (matches) return absl::OkStatus();
  std::string type_text;
  llvm::raw_string_ostream os(type_text);
  type.print(os);
  return absl::InvalidArgumentError(absl::StrCat(OpName(op), " produced ", tensor.ShapeString(),
                                                 ", which does not fit ", os.str()));
}

absl::StatusOr<const RefTensor*> Interpreter::LoadWeight(tfm::WeightOp weight) {
  auto param = mlir::SymbolTable::lookupNearestSymbolFrom<tfm::ParamOp>(weight,
                                                                      weight.getParamAttr());
  if (!param) {
    return weights_.Load(absl::string_view(weight.getParam().data(), weight.getParam().size()));
  }
  return LoadParam(param);
}

absl::StatusOr<const RefTensor*> Interpreter::LoadParam(tfm::ParamOp param) {
  const std::string name = param.getSymName().str();
  if (param.isModelWeight()) return weights_.Load(name);
  if (auto known = derived_.find(name); known != derived_.end()) return &known->second;
  auto source_of = [&](mlir::FlatSymbolRefAttr source) -> absl::StatusOr<const RefTensor*> {
    auto source_param = mlir::SymbolTable::lookupNearestSymbolFrom<tfm::ParamOp>(param, source);
    if (!source_param) {
      return absl::NotFoundError(absl::StrCat("weight @", name, " is made from @",
                                              source.getValue().str(),
                                              ", which no tfm.param declares"));
    }
    return LoadParam(source_param);
  };
  if (mlir::FlatSymbolRefAttr source = param.getShiftedAttr()) {
    KVJIT_ASSIGN_OR_RETURN(const RefTensor* loaded, source_of(source));
    RefTensor shifted = *loaded;
    // In f32, as transformers adds Gemma's 1 to the weight.
    const float shift = param.getShiftAttr().getValue().convertToFloat();
    for (float& value : shifted.values) value = shift + value;
    return &derived_.emplace(name, std::move(shifted)).first->second;
  }
  if (mlir::FlatSymbolRefAttr source = param.getSlicedAttr()) {
    KVJIT_ASSIGN_OR_RETURN(const RefTensor* loaded, source_of(source));
    auto type = mlir::cast<mlir::RankedTensorType>(param.getType());
    absl::StatusOr<RefTensor> slice =
        SliceAxis(*loaded, *param.getSliceAxis(), *param.getSliceFrom(),
                  type.getDimSize(*param.getSliceAxis()));
    if (!slice.ok()) {
      return absl::Status(slice.status().code(),
                          absl::StrCat("weight @", name, ": ", slice.status().message()));
    }
    return &derived_.emplace(name, *std::move(slice)).first->second;
  }
  std::vector<const RefTensor*> parts;
  for (mlir::FlatSymbolRefAttr part : param.getConcat()->getAsRange<mlir::FlatSymbolRefAttr>()) {
    KVJIT_ASSIGN_OR_RETURN(const RefTensor* loaded, source_of(part));
    parts.push_back(loaded);
  }
  absl::StatusOr<RefTensor> rows = ConcatRows(parts);
  if (!rows.ok()) {
    return absl::Status(rows.status().code(),
                        absl::StrCat("weight @", name, ": ", rows.status().message()));
  }
  return &derived_.emplace(name, *std::move(rows)).first->second;
}

absl::Status Interpreter::Bind(mlir::OpResult result, RefTensor tensor) {
  KVJIT_RETURN_IF_ERROR(CheckAgainstType(result.getOwner(), result.getType(), tensor));
  env_[result.getAsOpaquePointer()] = std::move(tensor);
  return absl::OkStatus();
}

absl::Status Interpreter::BindAlias(mlir::OpResult result, const RefTensor& tensor) {
  KVJIT_RETURN_IF_ERROR(CheckAgainstType(result.getOwner(), result.getType(), tensor));
  aliases_[result.getAsOpaquePointer()] = &tensor;
  return absl::OkStatus();
}

absl::StatusOr<std::vector<RefTensor>> Interpreter::Run(mlir::func::FuncOp function,
                                                        std::vector<RefTensor> arguments) {
  mlir::Block& body = function.getBody().front();
  if (arguments.size() != body.getNumArguments()) {
    return absl::InvalidArgumentError(absl::StrCat("@", function.getSymName().str(), " takes ",
                                                   body.getNumArguments(), " arguments, got ",
                                                   arguments.size()));
  }
  for (size_t i = 0; i < arguments.size(); ++i) {
    mlir::BlockArgument argument = body.getArgument(i);
    if (mlir::isa<kv::CacheType>(argument.getType())) continue;
    if (absl::Status s = CheckAgainstType(function, argument.getType(), arguments[i]); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("argument #", i, ": ", s.message()));
    }
    env_[argument.getAsOpaquePointer()] = std::move(arguments[i]);
  }
  return RunOps(body);
}

absl::StatusOr<std::vector<RefTensor>> Interpreter::RunBlock(mlir::Block& block,
                                                             mlir::ValueRange inputs) {
  for (auto [argument, input] : llvm::zip(block.getArguments(), inputs)) {
    aliases_[argument.getAsOpaquePointer()] = &Get(input);
  }
  return RunOps(block);
}

absl::StatusOr<std::vector<RefTensor>> Interpreter::RunOps(mlir::Block& block) {
  for (mlir::Operation& op : block) {
    if (op.hasTrait<mlir::OpTrait::ReturnLike>()) {
      std::vector<RefTensor> results;
      for (mlir::Value value : op.getOperands()) results.push_back(Get(value));
      return results;
    }
    auto evaluable = mlir::dyn_cast<ReferenceEvaluableOpInterface>(op);
    if (!evaluable) {
      return absl::UnimplementedError(absl::StrCat(
          "the reference evaluator has no semantics for ", OpName(&op),
          ": it implements no ReferenceEvaluableOpInterface (each dialect's ops get theirs in "
          "ir/Reference/<Dialect>Reference.cpp)"));
    }
    KVJIT_RETURN_IF_ERROR(evaluable.evaluateReference(*this));
  }
  return absl::InvalidArgumentError("block ends without func.return or kernel.yield");
}

}  // namespace

ReferenceEvaluator::ReferenceEvaluator(mlir::ModuleOp module, WeightProvider& weights)
    : module_(module), weights_(weights) {
  EnsureReferenceModels(*module.getContext());
}

absl::StatusOr<std::vector<RefTensor>> ReferenceEvaluator::Run(absl::string_view function,
                                                               std::vector<RefTensor> arguments) {
  auto func = module_.lookupSymbol<mlir::func::FuncOp>(
      llvm::StringRef(function.data(), function.size()));
  if (!func || func.isExternal()) {
    return absl::NotFoundError(absl::StrCat("no function @", function, " to evaluate"));
  }
  return Interpreter(weights_, cache_, communicator_, derived_).Run(func, std::move(arguments));
}

}  // namespace kvjit::reference
