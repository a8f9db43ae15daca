#include "codegen/ExecutableWriter.h"

#include <optional>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "codegen/cuda/CudaModuleWriter.h"
#include "codegen/lowering/ExecutableLowerableOpInterface.h"
#include "codegen/lowering/InstructionEmitter.h"
#include "ir/Dist/DistDialect.h"
#include "ir/Kernel/KernelOps.h"
#include "ir/Kv/KvOps.h"
#include "ir/Kv/KvTypes.h"
#include "ir/Tfm/TfmOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/raw_ostream.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/SymbolTable.h"
#include "passes/MemoryPlanChecker.h"
#include "runtime/core/AtomicFile.h"
#include "runtime/core/BuildInfo.h"
#include "runtime/core/StatusMacros.h"
#include "runtime/exec/OpTable.h"
#include "runtime/schema/KvCacheFormat.h"
#include "runtime/schema/SchemaVersion.h"
#include "runtime/schema/StepContract.h"
#include "runtime/schema/kvx_generated.h"
#include "runtime/tokenizer/ExecutableTokenizer.h"

namespace kvjit::codegen {
namespace {

using flatbuffers::Offset;
using TensorRefOffset = Offset<kvx::TensorRef>;

constexpr char kStepFunctionAttr[] = "kv.step_function";

// The step contract's tensor arguments (runtime/schema/StepContract.h), in
// order, then the cache.
constexpr unsigned kCacheArgument = kvx::kStepInputCount;

std::string Describe(mlir::Location location) {
  std::string text;
  llvm::raw_string_ostream stream(text);
  stream << location;
  return text;
}

std::string Describe(mlir::Type type) {
  std::string text;
  llvm::raw_string_ostream stream(text);
  stream << type;
  return text;
}

kvx::RopeStyle ToKvxRopeStyle(model::RopeStyle style) {
  return style == model::RopeStyle::kNeox ? kvx::RopeStyle::NeoX : kvx::RopeStyle::Interleaved;
}

// A step-function value as the program sees it: where it lives and its shape,
// plus the kind of size its rows have, which the ops it feeds inherit.
struct TensorInfo {
  TensorInfo(kvx::BufferKind kind, uint32_t index, uint64_t offset)
      : kind(kind), index(index), offset(offset) {}

  kvx::BufferKind kind;
  uint32_t index;
  uint64_t offset;
  std::vector<kvx::Dim> shape;
  kvx::DimKind row_kind = kvx::DimKind::Static;
  // Non-zero for a column view: floats from one row's start to the next.
  uint64_t row_stride = 0;
  TensorRefOffset ref;
};

// The writer's half of the lowering: the program's tensors, its instructions
// and the weight table, which each op's ExecutableLowerableOpInterface
// appends to.
class ExecutableBuilder final : public InstructionEmitter {
 public:
  ExecutableBuilder(const model::ModelFile& model, SourceWeights sources,
                    SidecarTarget sidecar_target)
      : model_(model),
        sources_(std::move(sources)),
        materializer_(sources_),
        sidecar_target_(std::move(sidecar_target)) {}

  absl::StatusOr<flatbuffers::DetachedBuffer> Build(mlir::func::FuncOp step,
                                                    const tokenizer::Vocabulary& vocabulary,
                                                    const std::string& chat_template,
                                                    const CudaSection* cuda,
                                                    const OtherRanks& other_ranks) {
    KVJIT_ASSIGN_OR_RETURN(Offset<kvx::TensorParallel> parallel,
                           AddTensorParallel(step->getParentOfType<mlir::ModuleOp>(), other_ranks));
    KVJIT_RETURN_IF_ERROR(AddStepInputs(step));
    KVJIT_ASSIGN_OR_RETURN(Offset<kvx::Program> program, AddProgram(step));
    std::vector<WeightFile> weight_files = sources_.files();
    KVJIT_ASSIGN_OR_RETURN(std::optional<WeightFile> sidecar,
                           materializer_.WriteSidecar(sidecar_target_));
    if (sidecar) weight_files.push_back(*std::move(sidecar));
    KVJIT_ASSIGN_OR_RETURN(Offset<kvx::KvLayout> kv_layout, AddKvLayout(step));
    Offset<kvx::ModelConfig> config = AddModelConfig(step);
    Offset<kvx::Tokenizer> tokenizer = AddTokenizer(vocabulary, chat_template);
    std::vector<Offset<kvx::WeightFile>> files;
    for (const WeightFile& file : weight_files) {
      files.push_back(kvx::CreateWeightFileDirect(fbb_, file.path.c_str(), file.size_bytes));
    }
    if (cuda != nullptr && cuda->module.instructions.size() != instructions_.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the CUDA module has ", cuda->module.instructions.size(),
          " instructions for a program of ", instructions_.size()));
    }
    Offset<kvx::CudaModule> cuda_module =
        cuda != nullptr ? cuda::AddCudaModule(fbb_, cuda->module, cuda->binary) : 0;
    const std::string compiler_version(KvjitVersion());
    Offset<kvx::Executable> executable = kvx::CreateExecutableDirect(
        fbb_, kvx::kSchemaVersion, compiler_version.c_str(), config, tokenizer, &files,
        &weights_, kv_layout, program, cuda_module, parallel);
    kvx::FinishExecutableBuffer(fbb_, executable);
    return fbb_.Release();
  }

 private:
  // The rank a program of shard-tensor-parallel is (`dist.ranks`,
  // `dist.rank` on its module); rank 0's holds the others' executables.
  absl::StatusOr<Offset<kvx::TensorParallel>> AddTensorParallel(mlir::ModuleOp module,
                                                                const OtherRanks& other_ranks) {
    auto ranks = module->getAttrOfType<mlir::IntegerAttr>(
        dist::DistDialect::RanksAttrHelper::getNameStr());
    auto rank = module->getAttrOfType<mlir::IntegerAttr>(
        dist::DistDialect::RankAttrHelper::getNameStr());
    if (!ranks || ranks.getInt() <= 1) {
      if (!other_ranks.empty()) {
        return absl::InvalidArgumentError(
            "other ranks' executables were given for a program that runs in one process");
      }
      return Offset<kvx::TensorParallel>();
    }
    if (!rank || rank.getInt() < 0 || rank.getInt() >= ranks.getInt()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the module is split over ", ranks.getInt(), " ranks (dist.ranks) but names no rank "
          "of them in dist.rank"));
    }
    const size_t expected = rank.getInt() == 0 ? static_cast<size_t>(ranks.getInt() - 1) : 0;
    if (other_ranks.size() != expected) {
      return absl::InvalidArgumentError(absl::StrCat(
          "rank ", rank.getInt(), " of ", ranks.getInt(), " holds ", expected,
          " other ranks' executables, and ", other_ranks.size(), " were given"));
    }
    std::vector<Offset<kvx::RankExecutable>> nested;
    for (const flatbuffers::DetachedBuffer* other : other_ranks) {
      // Each nested executable is read in place: its tables need the
      // alignment of a root buffer.
      fbb_.ForceVectorAlignment(other->size(), sizeof(uint8_t), kNestedAlignment);
      nested.push_back(kvx::CreateRankExecutable(fbb_, fbb_.CreateVector(other->data(), other->size())));
    }
    return kvx::CreateTensorParallelDirect(fbb_, static_cast<uint32_t>(ranks.getInt()),
                                           static_cast<uint32_t>(rank.getInt()),
                                           expected > 0 ? &nested : nullptr);
  }

  static constexpr size_t kNestedAlignment = 16;

  absl::Status AddStepInputs(mlir::func::FuncOp step) {
    mlir::Block& body = step.getBody().front();
    if (body.getNumArguments() != kCacheArgument + 1 ||
        !mlir::isa<kv::CacheType>(body.getArgument(kCacheArgument).getType())) {
      std::string names;
      for (const kvx::StepInputSpec& spec : kvx::kStepInputs) {
        absl::StrAppend(&names, spec.name, ", ");
      }
      return absl::InvalidArgumentError(absl::StrCat(
          "function @", step.getSymName().str(), " at ", Describe(step.getLoc()),
          " does not take the step contract's arguments (", names, "cache)"));
    }
    for (const kvx::StepInputSpec& spec : kvx::kStepInputs) {
      const unsigned index = static_cast<unsigned>(spec.input);
      mlir::BlockArgument argument = body.getArgument(index);
      auto type = mlir::dyn_cast<mlir::RankedTensorType>(argument.getType());
      if (!type || !type.getElementType().isInteger(32) || type.getRank() != spec.rank) {
        return absl::InvalidArgumentError(absl::StrCat(
            "function @", step.getSymName().str(), ": step input ", index, " (", spec.name,
            ") has type ", Describe(argument.getType()), ", not an i32 tensor of rank ",
            spec.rank));
      }
      TensorInfo info(kvx::BufferKind::Input, index, 0);
      for (int d = 0; d < spec.rank; ++d) info.shape.push_back(kvx::Dim(spec.dims[d], 0));
      info.row_kind = spec.dims[0];
      info.ref = CreateRef(info);
      tensors_.try_emplace(argument, std::move(info));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<Offset<kvx::Program>> AddProgram(mlir::func::FuncOp step) {
    kernel::ArenaAttr arena = ArenaOf(step);
    if (!arena || arena.getMaxTokens() <= 0) {
      return absl::InvalidArgumentError(absl::StrCat("function @", step.getSymName().str(),
                                                     " has a malformed ", kArenaAttrName.str()));
    }
    arena_bytes_ = arena.getBytes();
    std::optional<TensorRefOffset> logits;
    for (mlir::Operation& op : step.getBody().front()) {
      if (auto ret = mlir::dyn_cast<mlir::func::ReturnOp>(op)) {
        if (ret.getNumOperands() != 1) {
          return absl::InvalidArgumentError(
              absl::StrCat(DescribeOp(&op), " returns ", ret.getNumOperands(),
                           " values; a step function returns the logits alone"));
        }
        if (tensors_.count(ret.getOperand(0)) && tensors_.at(ret.getOperand(0)).row_stride != 0) {
          return absl::UnimplementedError(
              absl::StrCat(DescribeOp(&op), " returns a column view; the logits are dense rows"));
        }
        KVJIT_ASSIGN_OR_RETURN(logits, Ref(ret.getOperand(0), &op));
        continue;
      }
      KVJIT_RETURN_IF_ERROR(AddInstruction(&op));
    }
    if (!logits) {
      return absl::InvalidArgumentError(absl::StrCat("function @", step.getSymName().str(),
                                                     " does not return its logits"));
    }
    return kvx::CreateProgram(fbb_, fbb_.CreateVector(instructions_), *logits,
                              static_cast<uint64_t>(arena_bytes_),
                              static_cast<uint32_t>(arena.getMaxTokens()));
  }

  // The instruction of one op of the step function's body, appended in
  // program order: the plan's liveness holds for that order alone.
  absl::Status AddInstruction(mlir::Operation* op) {
    auto lowerable = mlir::dyn_cast<ExecutableLowerableOpInterface>(op);
    if (!lowerable) {
      return absl::UnimplementedError(
          absl::StrCat(DescribeOp(op), " has no instruction in the executable"));
    }
    return lowerable.lowerToExecutable(*this);
  }

  flatbuffers::FlatBufferBuilder& builder() override { return fbb_; }

  absl::Status Emit(mlir::Operation* op, kvx::OpCode opcode, const std::vector<mlir::Value>& inputs,
                    mlir::Value rows_from, const InstructionParams& params,
                    std::vector<unsigned> output_order) override {
    std::vector<TensorRefOffset> input_refs;
    for (mlir::Value input : inputs) {
      KVJIT_ASSIGN_OR_RETURN(TensorRefOffset ref, Ref(input, op));
      input_refs.push_back(ref);
      // The runtime's op table says whose kernels read a view in place.
      if (!runtime::FindOp(opcode)->reads_views && tensors_.at(input).row_stride != 0) {
        return absl::UnimplementedError(absl::StrCat(
            DescribeOp(op), " reads a column view (tfm.slice_columns); ",
            kvx::EnumNameOpCode(opcode), " instructions do not read views in place"));
      }
    }
    const kvx::DimKind row_kind = tensors_.at(rows_from).row_kind;
    KVJIT_RETURN_IF_ERROR(AddResults(op, row_kind));
    if (output_order.empty()) {
      for (unsigned index = 0; index < op->getNumResults(); ++index) output_order.push_back(index);
    }
    std::vector<TensorRefOffset> output_refs;
    for (unsigned index : output_order) output_refs.push_back(tensors_.at(op->getResult(index)).ref);
    instructions_.push_back(kvx::CreateInstructionDirect(fbb_, opcode, &input_refs, &output_refs,
                                                         params.type, params.table));
    return absl::OkStatus();
  }

  // Places `op`'s results at their arena offsets, with every dynamic
  // dimension standing for `row_kind`.
  absl::Status AddResults(mlir::Operation* op, kvx::DimKind row_kind) {
    if (op->getNumResults() == 0) return absl::OkStatus();
    mlir::DenseI64ArrayAttr offsets = ArenaOffsetsOf(op);
    if (!offsets || offsets.size() != static_cast<int64_t>(op->getNumResults())) {
      return absl::FailedPreconditionError(absl::StrCat(DescribeOp(op), " has no ",
                                                        kArenaOffsetsAttrName.str(),
                                                        " entry per result; run plan-memory first"));
    }
    for (mlir::OpResult result : op->getResults()) {
      auto type = mlir::dyn_cast<mlir::RankedTensorType>(result.getType());
      const int64_t offset = offsets[result.getResultNumber()];
      if (!type || !type.getElementType().isF32()) {
        return absl::UnimplementedError(absl::StrCat(
            DescribeOp(op), " result #", result.getResultNumber(), " has type ",
            Describe(result.getType()), "; the activation arena holds f32 tensors"));
      }
      if (offset < 0 || offset >= arena_bytes_) {
        return absl::FailedPreconditionError(absl::StrCat(
            DescribeOp(op), " result #", result.getResultNumber(), " has arena offset ", offset,
            " outside the arena of ", arena_bytes_, " bytes"));
      }
      TensorInfo info(kvx::BufferKind::Arena, 0, static_cast<uint64_t>(offset));
      KVJIT_ASSIGN_OR_RETURN(info.shape, StepShape(op, type, row_kind));
      info.row_kind = row_kind;
      info.ref = CreateRef(info);
      tensors_.try_emplace(result, std::move(info));
    }
    return absl::OkStatus();
  }

  static absl::StatusOr<std::vector<kvx::Dim>> StepShape(mlir::Operation* op,
                                                          mlir::RankedTensorType type,
                                                          kvx::DimKind row_kind) {
    std::vector<kvx::Dim> shape;
    int dynamic_dims = 0;
    for (int64_t size : type.getShape()) {
      if (mlir::ShapedType::isDynamic(size)) {
        ++dynamic_dims;
        shape.push_back(kvx::Dim(row_kind, 0));
      } else {
        shape.push_back(kvx::Dim(kvx::DimKind::Static, size));
      }
    }
    if (dynamic_dims > 1 || (dynamic_dims == 1 && row_kind == kvx::DimKind::Static)) {
      return absl::UnimplementedError(absl::StrCat(
          DescribeOp(op), " produces ", Describe(type),
          "; a step tensor has at most one dynamic dimension, its rows"));
    }
    return shape;
  }

  // A column view of an arena tensor: no instruction, a reference into the
  // viewed rows with their stride.
  absl::Status BindColumnView(tfm::SliceColumnsOp slice) override {
    mlir::Operation* op = slice.getOperation();
    auto source = tensors_.find(slice.getInput());
    if (source == tensors_.end() || source->second.kind != kvx::BufferKind::Arena) {
      return absl::UnimplementedError(
          absl::StrCat(DescribeOp(op), " views a value that is not an activation in the arena"));
    }
    const TensorInfo& viewed = source->second;
    auto input_type = mlir::cast<mlir::RankedTensorType>(slice.getInput().getType());
    auto type = mlir::cast<mlir::RankedTensorType>(slice.getType());
    TensorInfo info(kvx::BufferKind::Arena, 0,
                    viewed.offset + static_cast<uint64_t>(slice.getOffset()) * sizeof(float));
    KVJIT_ASSIGN_OR_RETURN(info.shape, StepShape(op, type, viewed.row_kind));
    info.row_kind = viewed.row_kind;
    info.row_stride = viewed.row_stride != 0 ? viewed.row_stride
                                             : static_cast<uint64_t>(input_type.getDimSize(1));
    info.ref = CreateRef(info);
    tensors_.try_emplace(slice.getResult(), std::move(info));
    return absl::OkStatus();
  }

  absl::Status BindWeight(tfm::WeightOp weight) override {
    auto param = mlir::SymbolTable::lookupNearestSymbolFrom<tfm::ParamOp>(weight,
                                                                        weight.getParamAttr());
    if (!param) {
      return absl::InvalidArgumentError(
          absl::StrCat(DescribeOp(weight.getOperation()), " reads @",
                       weight.getParam().str(), ", which no tfm.param declares"));
    }
    const std::string name = param.getSymName().str();
    auto [known, inserted] = weight_index_.try_emplace(name, weights_.size());
    if (inserted) KVJIT_RETURN_IF_ERROR(AddWeightEntry(param));
    auto type = mlir::cast<mlir::RankedTensorType>(weight.getType());
    TensorInfo info(kvx::BufferKind::Weight, static_cast<uint32_t>(known->second), 0);
    KVJIT_ASSIGN_OR_RETURN(info.shape, StepShape(weight, type, kvx::DimKind::Static));
    info.ref = CreateRef(info);
    tensors_.try_emplace(weight.getResult(), std::move(info));
    return absl::OkStatus();
  }

  // The weight table's entry of `param`: where the model stores its weight,
  // or, for one the compiler derives, where the sidecar holds it.
  absl::Status AddWeightEntry(tfm::ParamOp param) {
    KVJIT_ASSIGN_OR_RETURN(WeightEntry entry, WeightMaterializer::Derives(param)
                                                  ? materializer_.Materialize(param)
                                                  : sources_.Locate(param));
    weights_.push_back(kvx::CreateWeightDirect(
        fbb_, param.getSymName().str().c_str(), entry.storage, &entry.shape, entry.file_index,
        entry.offset, entry.size_bytes, entry.checksum, entry.layout));
    return absl::OkStatus();
  }

  absl::Status CheckCache(mlir::Operation* op, mlir::Value cache) override {
    auto argument = mlir::dyn_cast<mlir::BlockArgument>(cache);
    if (!argument || argument.getArgNumber() != kCacheArgument) {
      return absl::InvalidArgumentError(absl::StrCat(
          DescribeOp(op), " reads a KV cache other than the step function's cache argument"));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<TensorRefOffset> Ref(mlir::Value value, mlir::Operation* user) {
    auto known = tensors_.find(value);
    if (known == tensors_.end()) {
      return absl::UnimplementedError(absl::StrCat(
          DescribeOp(user), " reads a value of type ", Describe(value.getType()),
          " that is neither a step input, a weight nor an earlier instruction's result"));
    }
    return known->second.ref;
  }

  TensorRefOffset CreateRef(const TensorInfo& info) {
    return kvx::CreateTensorRefDirect(fbb_, info.kind, info.index, info.offset, &info.shape,
                                      info.row_stride);
  }

  absl::StatusOr<Offset<kvx::KvLayout>> AddKvLayout(mlir::func::FuncOp step) {
    auto cache = mlir::cast<kv::CacheType>(step.getArgument(kCacheArgument).getType());
    // Its sizes are positive: #kv.layout's verifier holds them to it.
    kv::LayoutAttr layout = KvLayoutOf(step);
    if (!layout) {
      return absl::InvalidArgumentError(absl::StrCat("function @", step.getSymName().str(),
                                                     " has no ", kKvLayoutAttrName.str()));
    }
    return kvx::CreateKvLayout(
        fbb_, static_cast<uint32_t>(cache.getLayers()), static_cast<uint32_t>(cache.getKvHeads()),
        static_cast<uint32_t>(cache.getHeadDim()), static_cast<uint32_t>(layout.getBlockSize()),
        kv::CacheFormat(layout.getKeyType()).type, static_cast<uint64_t>(layout.getBlockBytes()),
        static_cast<uint64_t>(layout.getLayerStrideBytes()),
        static_cast<uint64_t>(layout.getValueOffsetBytes()),
        static_cast<uint64_t>(layout.getKeySlotStrideBytes()),
        static_cast<uint64_t>(layout.getBlocks()), kv::CacheFormat(layout.getValueType()).type,
        static_cast<uint64_t>(layout.getValueSlotStrideBytes()),
        static_cast<uint32_t>(cache.getKeyRotation()), static_cast<uint32_t>(cache.getValueRotation()));
  }

  // The model's config, with the layers of `step`'s cache: fewer than the
  // model's where keep-first-layers cut it.
  Offset<kvx::ModelConfig> AddModelConfig(mlir::func::FuncOp step) {
    const model::ModelConfig& config = model_.config;
    const int64_t layers =
        mlir::cast<kv::CacheType>(step.getArgument(kCacheArgument).getType()).getLayers();
    const model::RopeScaling& scaling = config.rope_scaling;
    kvx::RopeScalingKind scaling_kind = kvx::RopeScalingKind::None;
    if (scaling.kind == model::RopeScalingKind::kLinear) scaling_kind = kvx::RopeScalingKind::Linear;
    if (scaling.kind == model::RopeScalingKind::kLlama3) scaling_kind = kvx::RopeScalingKind::Llama3;
    Offset<kvx::RopeScaling> rope_scaling = kvx::CreateRopeScaling(
        fbb_, scaling_kind, static_cast<float>(scaling.factor),
        static_cast<float>(scaling.low_freq_factor), static_cast<float>(scaling.high_freq_factor),
        static_cast<uint32_t>(scaling.original_context));
    return kvx::CreateModelConfigDirect(
        fbb_, config.architecture.c_str(), config.name.c_str(),
        static_cast<uint32_t>(config.vocab_size), static_cast<uint32_t>(config.hidden_size),
        static_cast<uint32_t>(config.intermediate_size), static_cast<uint32_t>(layers),
        static_cast<uint32_t>(config.num_heads), static_cast<uint32_t>(config.num_kv_heads),
        static_cast<uint32_t>(config.head_dim), static_cast<uint32_t>(config.context_length),
        static_cast<float>(config.rms_norm_eps), static_cast<float>(config.rope_theta),
        ToKvxRopeStyle(config.rope_style), rope_scaling, config.tied_embeddings,
        config.qkv_bias);
  }

  Offset<kvx::Tokenizer> AddTokenizer(const tokenizer::Vocabulary& vocabulary,
                                      const std::string& chat_template) {
    return tokenizer::WriteTokenizerTable(fbb_, vocabulary, chat_template);
  }

  const model::ModelFile& model_;
  SourceWeights sources_;
  WeightMaterializer materializer_;
  SidecarTarget sidecar_target_;
  flatbuffers::FlatBufferBuilder fbb_;
  llvm::DenseMap<mlir::Value, TensorInfo> tensors_;
  absl::flat_hash_map<std::string, size_t> weight_index_;
  std::vector<Offset<kvx::Weight>> weights_;
  std::vector<Offset<kvx::Instruction>> instructions_;
  int64_t arena_bytes_ = 0;
};

absl::StatusOr<mlir::func::FuncOp> FindStepFunction(mlir::ModuleOp module) {
  std::vector<mlir::func::FuncOp> steps;
  for (mlir::func::FuncOp func : module.getOps<mlir::func::FuncOp>()) {
    if (func->hasAttr(kStepFunctionAttr)) steps.push_back(func);
  }
  if (steps.size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the module holds ", steps.size(), " functions marked ", kStepFunctionAttr,
        "; an executable runs exactly one (run insert-kv-cache first)"));
  }
  if (steps.front().isDeclaration() || !steps.front().getBody().hasOneBlock()) {
    return absl::InvalidArgumentError(absl::StrCat("function @", steps.front().getSymName().str(),
                                                   " needs a body of one block"));
  }
  return steps.front();
}

absl::Status RequirePlan(mlir::func::FuncOp step) {
  for (llvm::StringRef attribute : {kArenaAttrName, kKvLayoutAttrName}) {
    if (!step->hasAttr(attribute)) {
      return absl::FailedPreconditionError(absl::StrCat("function @", step.getSymName().str(),
                                                        " has no ", attribute.str(),
                                                        "; run plan-memory first"));
    }
  }
  return absl::OkStatus();
}

// plan-memory's offsets are the one thing the runtime cannot check cheaply:
// an overlap corrupts activations silently. Prove the plan before trusting it.
absl::Status VerifyPlan(mlir::func::FuncOp step) {
  std::string messages;
  mlir::ScopedDiagnosticHandler collect(step.getContext(), [&](mlir::Diagnostic& diagnostic) {
    absl::StrAppend(&messages, messages.empty() ? "" : "\n", Describe(diagnostic.getLocation()),
                    ": ", diagnostic.str());
    return mlir::success();
  });
  if (mlir::failed(VerifyMemoryPlan(step))) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the memory plan of @", step.getSymName().str(), " is unsound: ", messages));
  }
  return absl::OkStatus();
}

}  // namespace


absl::StatusOr<flatbuffers::DetachedBuffer> WriteExecutable(
    mlir::ModuleOp planned_module, const model::ModelFile& model,
    const tokenizer::Vocabulary& vocabulary, const std::string& chat_template,
    const SidecarTarget& sidecar, const CudaSection* cuda, const OtherRanks& other_ranks) {
  KVJIT_ASSIGN_OR_RETURN(mlir::func::FuncOp step, FindStepFunction(planned_module));
  KVJIT_RETURN_IF_ERROR(RequirePlan(step));
  KVJIT_RETURN_IF_ERROR(VerifyPlan(step));
  EnsureLoweringModels(*planned_module.getContext());
  KVJIT_ASSIGN_OR_RETURN(SourceWeights sources, SourceWeights::ForModel(model));
  ExecutableBuilder builder(model, std::move(sources), sidecar);
  return builder.Build(step, vocabulary, chat_template, cuda, other_ranks);
}

absl::Status WriteExecutableFile(const flatbuffers::DetachedBuffer& executable,
                                 const std::string& path) {
  return WriteFileAtomically(path, absl::MakeConstSpan(executable.data(), executable.size()));
}

}  // namespace kvjit::codegen
