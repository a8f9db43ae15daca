#include "ir/Reference/ReferenceEvaluator.h"

#include "absl/container/flat_hash_map.h"
#include "absl/container/node_hash_map.h"
#include "absl/strings/str_cat.h"
#include "ir/Reference/RefKernels.h"
#include "ir/Kernel/KernelOps.h"
#include "ir/Kv/KvOps.h"
#include "ir/Tfm/TfmOps.h"
#include "llvm/ADT/TypeSwitch.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/SymbolTable.h"
#include "runtime/core/StatusMacros.h"

namespace kvjit::reference {
namespace {

// An attention's `window` attribute; 0 where it has none.
int64_t WindowOf(mlir::IntegerAttr window) { return window ? window.getInt() : 0; }

std::string OpName(mlir::Operation* op) { return op->getName().getStringRef().str(); }

RopeParams RopeParamsOf(tfm::RopeOp op) {
  RopeParams params;
  params.pairing = op.getStyle() == tfm::RopeStyle::neox ? RopePairing::kNeox
                                                         : RopePairing::kInterleaved;
  params.theta = op.getTheta().convertToFloat();
  if (op.getRotaryDimAttr()) params.rotary_dim = op.getRotaryDimAttr().getInt();
  if (tfm::RopeScalingAttr scaling = op.getScalingAttr()) {
    params.scaling = scaling.getKind() == tfm::RopeScalingKind::linear ? RopeScalingKind::kLinear
                                                                        : RopeScalingKind::kLlama3;
    params.factor = scaling.getFactor().convertToDouble();
    params.low_freq_factor = scaling.getLowFreqFactor().convertToDouble();
    params.high_freq_factor = scaling.getHighFreqFactor().convertToDouble();
    params.original_context = scaling.getOriginalContext();
  }
  if (std::optional<llvm::ArrayRef<float>> factors = op.getFreqFactors()) {
    params.freq_factors.assign(factors->begin(), factors->end());
  }
  return params;
}

// Runs one function body; values live in `env` until the function returns.
class Interpreter {
 public:
  Interpreter(WeightProvider& weights, RefKvCache* cache,
              absl::node_hash_map<std::string, RefTensor>& concatenated)
      : weights_(weights), cache_(cache), concatenated_(concatenated) {}

  absl::StatusOr<std::vector<RefTensor>> Run(mlir::func::FuncOp function,
                                             std::vector<RefTensor> arguments);

 private:
  // Runs `block`'s ops in order and returns the values its terminator
  // (func.return or kernel.yield) passes on.
  absl::StatusOr<std::vector<RefTensor>> RunBlock(mlir::Block& block);
  absl::StatusOr<RefTensor> Evaluate(mlir::Operation* op);
  const RefTensor& Get(mlir::Value value) {
    auto alias = aliases_.find(value.getAsOpaquePointer());
    return alias != aliases_.end() ? *alias->second : env_.at(value.getAsOpaquePointer());
  }
  const RefTensor* GetOptional(mlir::Value value) { return value ? &Get(value) : nullptr; }
  absl::Status CheckAgainstType(mlir::Operation* op, mlir::Type type, const RefTensor& tensor);

  // The values of the param `weight` reads: the provider's, or for a
  // concatenation, its parts' rows one after the other.
  absl::StatusOr<const RefTensor*> LoadWeight(tfm::WeightOp weight);

  absl::StatusOr<RefKvCache*> Cache(mlir::Operation* op) {
    if (cache_ != nullptr) return cache_;
    return absl::FailedPreconditionError(absl::StrCat(OpName(op), " needs a KV cache"));
  }

  WeightProvider& weights_;
  RefKvCache* cache_;
  absl::node_hash_map<std::string, RefTensor>& concatenated_;
  // Node-based: references handed out by Get() stay valid while values are added.
  absl::node_hash_map<const void*, RefTensor> env_;
  // Values that are other tensors, not copies of them: weights (the
  // provider keeps them) and a fusion body's arguments (its inputs). A model's
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
  if (!param || !param.getConcat()) {
    return weights_.Load(absl::string_view(weight.getParam().data(), weight.getParam().size()));
  }
  const std::string name = param.getSymName().str();
  if (auto known = concatenated_.find(name); known != concatenated_.end()) return &known->second;
  std::vector<const RefTensor*> parts;
  for (mlir::FlatSymbolRefAttr part : param.getConcat()->getAsRange<mlir::FlatSymbolRefAttr>()) {
    KVJIT_ASSIGN_OR_RETURN(const RefTensor* loaded,
                           weights_.Load(absl::string_view(part.getValue().data(),
                                                           part.getValue().size())));
    parts.push_back(loaded);
  }
  absl::StatusOr<RefTensor> rows = ConcatRows(parts);
  if (!rows.ok()) {
    return absl::Status(rows.status().code(),
                        absl::StrCat("weight @", name, ": ", rows.status().message()));
  }
  return &concatenated_.emplace(name, *std::move(rows)).first->second;
}

absl::StatusOr<RefTensor> Interpreter::Evaluate(mlir::Operation* op) {
  using Result = absl::StatusOr<RefTensor>;
  return llvm::TypeSwitch<mlir::Operation*, Result>(op)
      .Case([&](tfm::EmbeddingOp e) { return Embedding(Get(e.getTable()), Get(e.getTokens())); })
      .Case([&](tfm::LinearOp l) {
        return Linear(Get(l.getInput()), Get(l.getWeight()), GetOptional(l.getBias()));
      })
      .Case([&](tfm::RmsNormOp n) {
        return RmsNorm(Get(n.getInput()), Get(n.getWeight()), n.getEpsilon().convertToFloat());
      })
      .Case([&](tfm::LayerNormOp n) {
        return LayerNorm(Get(n.getInput()), Get(n.getWeight()), GetOptional(n.getBias()),
                         n.getEpsilon().convertToFloat());
      })
      .Case([&](tfm::RopeOp r) {
        return Rope(Get(r.getInput()), Get(r.getPositions()), RopeParamsOf(r));
      })
      .Case([&](tfm::MatmulOp m) { return Matmul(Get(m.getLhs()), Get(m.getRhs())); })
      .Case([&](tfm::TransposeOp t) {
        return Transpose(Get(t.getInput()), std::vector<int64_t>(t.getPermutation().begin(),
                                                                 t.getPermutation().end()));
      })
      .Case([&](tfm::ReshapeOp r) {
        auto type = mlir::cast<mlir::RankedTensorType>(r.getType());
        std::vector<int64_t> shape(type.getShape().begin(), type.getShape().end());
        for (int64_t& dim : shape) {
          if (mlir::ShapedType::isDynamic(dim)) dim = -1;
        }
        return Reshape(Get(r.getInput()), shape);
      })
      .Case([&](tfm::RepeatOp r) {
        return Repeat(Get(r.getInput()), r.getAxisAttr().getInt(), r.getRepeatsAttr().getInt());
      })
      .Case([&](tfm::AddOp a) { return Add(Get(a.getLhs()), Get(a.getRhs())); })
      .Case([&](tfm::MulOp m) { return Mul(Get(m.getLhs()), Get(m.getRhs())); })
      .Case([&](tfm::ScaleOp s) -> Result {
        return Scale(Get(s.getInput()), s.getFactor().convertToFloat());
      })
      .Case([&](tfm::SiluOp s) -> Result { return Silu(Get(s.getInput())); })
      .Case([&](tfm::GeluOp g) -> Result {
        return Gelu(Get(g.getInput()), g.getApproximateTanh());
      })
      .Case([&](tfm::SoftmaxOp s) { return Softmax(Get(s.getInput()), s.getAxisAttr().getInt()); })
      .Case([&](tfm::CausalMaskOp c) {
        return CausalMask(Get(c.getInput()), WindowOf(c.getWindowAttr()));
      })
      .Case([&](tfm::AttentionOp a) {
        return Attention(Get(a.getQuery()), Get(a.getKey()), Get(a.getValue()),
                         a.getScale().convertToFloat(), a.getCausal(),
                         WindowOf(a.getWindowAttr()));
      })
      .Case([&](tfm::SliceColumnsOp s) {
        return SliceColumns(Get(s.getInput()), s.getOffset(), s.getSize());
      })
      .Case([&](tfm::GatherRowsOp g) { return GatherRows(Get(g.getInput()), Get(g.getRows())); })
      .Case([&](kv::AttentionOp a) -> Result {
        KVJIT_ASSIGN_OR_RETURN(RefKvCache * cache, Cache(a));
        return cache->Attend(a.getLayerAttr().getInt(), Get(a.getQuery()), Get(a.getPositions()),
                             Get(a.getSeqStarts()), Get(a.getContextLens()),
                             Get(a.getBlockTables()), a.getScale().convertToFloat(),
                             WindowOf(a.getWindowAttr()));
      })
      .Default([&](mlir::Operation* other) -> Result {
        return absl::UnimplementedError(
            absl::StrCat("the reference evaluator has no semantics for ", OpName(other)));
      });
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
  return RunBlock(body);
}

absl::StatusOr<std::vector<RefTensor>> Interpreter::RunBlock(mlir::Block& block) {
  for (mlir::Operation& op : block) {
    if (mlir::isa<mlir::func::ReturnOp, kernel::YieldOp>(op)) {
      std::vector<RefTensor> results;
      for (mlir::Value value : op.getOperands()) results.push_back(Get(value));
      return results;
    }
    if (auto write = mlir::dyn_cast<kv::WriteOp>(op)) {
      KVJIT_ASSIGN_OR_RETURN(RefKvCache * cache, Cache(write));
      KVJIT_RETURN_IF_ERROR(cache->Write(write.getLayerAttr().getInt(), Get(write.getKey()),
                                         Get(write.getValue()), Get(write.getSlotMapping())));
      continue;
    }
    // A fusion's kernel computes exactly its body, so the body is its semantics.
    if (auto fusion = mlir::dyn_cast<kernel::FusionOp>(op)) {
      mlir::Block& body = fusion.getBody().front();
      for (auto [argument, input] : llvm::zip(body.getArguments(), fusion.getInputs())) {
        aliases_[argument.getAsOpaquePointer()] = &Get(input);
      }
      KVJIT_ASSIGN_OR_RETURN(std::vector<RefTensor> results, RunBlock(body));
      for (auto [result, tensor] : llvm::zip(fusion.getResults(), results)) {
        KVJIT_RETURN_IF_ERROR(CheckAgainstType(fusion, result.getType(), tensor));
        env_[result.getAsOpaquePointer()] = std::move(tensor);
      }
      continue;
    }
    if (auto weight = mlir::dyn_cast<tfm::WeightOp>(op)) {
      KVJIT_ASSIGN_OR_RETURN(const RefTensor* loaded, LoadWeight(weight));
      KVJIT_RETURN_IF_ERROR(CheckAgainstType(&op, weight.getResult().getType(), *loaded));
      aliases_[weight.getResult().getAsOpaquePointer()] = loaded;
      continue;
    }
    absl::StatusOr<RefTensor> result = Evaluate(&op);
    if (!result.ok()) return result.status();
    if (absl::Status s = CheckAgainstType(&op, op.getResult(0).getType(), *result); !s.ok()) {
      return s;
    }
    env_[op.getResult(0).getAsOpaquePointer()] = *std::move(result);
  }
  return absl::InvalidArgumentError("block ends without func.return or kernel.yield");
}

}  // namespace

absl::StatusOr<std::vector<RefTensor>> ReferenceEvaluator::Run(absl::string_view function,
                                                               std::vector<RefTensor> arguments) {
  auto func = module_.lookupSymbol<mlir::func::FuncOp>(
      llvm::StringRef(function.data(), function.size()));
  if (!func || func.isExternal()) {
    return absl::NotFoundError(absl::StrCat("no function @", function, " to evaluate"));
  }
  return Interpreter(weights_, cache_, concatenated_).Run(func, std::move(arguments));
}

}  // namespace kvjit::reference
