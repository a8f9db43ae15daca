#include "codegen/ExecutableWriter.h"


#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "codegen/cuda/CudaModuleWriter.h"
#include "codegen/lowering/ExecutableLowerableOpInterface.h"
#include "codegen/lowering/InstructionEmitter.h"
#include "ir/Kernel/KernelOps.h"
#include "ir/Kv/KvOps.h"
#include "ir/Kv/KvTypes.h"
#include "ir/Tfm/TfmOps.h"
#include "ir/Tfm/TfmStorage.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/raw_ostream.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/SymbolTable.h"
#include "passes/MemoryPlanChecker.h"
#include "runtime/core/AtomicFile.h"
#include "runtime/core/BuildInfo.h"
#include "runtime/core/MappedFile.h"
#include "runtime/core/StatusMacros.h"
#include "runtime/exec/KvxTypes.h"
#include "runtime/exec/OpTable.h"
#include "runtime/schema/SchemaVersion.h"
#include "runtime/schema/StepContract.h"
#include "runtime/schema/WeightLayout.h"
#include "runtime/schema/kvx_generated.h"

namespace kvjit::codegen {
namespace {

using flatbuffers::Offset;
using TensorRefOffset = Offset<kvx::TensorRef>;

constexpr char kStepFunctionAttr[] = "kv.step_function";
constexpr uint64_t kFnvOffsetBasis = 14695981039346656037ull;
constexpr uint64_t kFnvPrime = 1099511628211ull;

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

const char* PreTokenizerName(tokenizer::PreTokenizer pre_tokenizer) {
  // The names tokenizer::ParsePreTokenizer reads back.
  switch (pre_tokenizer) {
    case tokenizer::PreTokenizer::kGpt2: return "gpt2";
    case tokenizer::PreTokenizer::kLlama3: return "llama3";
    case tokenizer::PreTokenizer::kSmolLm: return "smollm";
    case tokenizer::PreTokenizer::kQwen2: return "qwen2";
  }
  return "gpt2";
}

absl::StatusOr<kvx::StorageType> CacheElementStorage(mlir::Type element_type) {
  if (element_type.isF32()) return kvx::StorageType::F32;
  if (element_type.isF16()) return kvx::StorageType::F16;
  if (element_type.isBF16()) return kvx::StorageType::BF16;
  return absl::UnimplementedError(absl::StrCat("a KV cache of ", Describe(element_type),
                                               " has no executable encoding"));
}

// Where the bytes of the model's weights lie on disk: the files an
// executable names, and each weight's file and offset within it.
class WeightFileTable {
 public:
  struct Location {
    uint32_t file_index;
    uint64_t offset;
  };
  struct File {
    std::string path;  // absolute
    uint64_t size_bytes;
  };

  static absl::StatusOr<WeightFileTable> ForModel(const model::ModelFile& model) {
    WeightFileTable table(model);
    if (model.gguf != nullptr) {
      KVJIT_ASSIGN_OR_RETURN(File file, OnDisk(model.gguf->path()));
      table.files_.push_back(std::move(file));
    } else if (model.safetensors != nullptr) {
      for (const safetensors::SafetensorsFile& shard : model.safetensors->shards()) {
        table.files_.push_back({WeightFilePathAsNamed(shard.path()), shard.bytes().size()});
      }
    }
    return table;
  }

  const std::vector<File>& files() const { return files_; }

  absl::StatusOr<Location> Locate(const model::WeightInfo& weight) const {
    std::optional<Location> location;
    if (model_.gguf != nullptr) {
      if (const gguf::GgufTensor* tensor = model_.gguf->FindTensor(weight.name)) {
        location = Location{0, tensor->file_offset};
      }
    } else if (model_.safetensors != nullptr) {
      location = InShard(model_.weights->Bytes(weight));
    } else {
      return absl::FailedPreconditionError(absl::StrCat(
          model_.weights->origin(), ": tensor '", weight.name,
          "' is not in a file; an executable references weights by file and offset, so "
          "compile from a GGUF file or a safetensors checkpoint"));
    }
    if (!location) {
      return absl::NotFoundError(absl::StrCat(model_.path, ": tensor '", weight.name,
                                              "' is not in any of the model's files"));
    }
    const File& file = files_[location->file_index];
    if (location->offset > file.size_bytes || weight.size_bytes > file.size_bytes - location->offset) {
      return absl::OutOfRangeError(absl::StrCat(
          file.path, ": tensor '", weight.name, "' (", weight.size_bytes, " bytes at offset ",
          location->offset, ") runs past the file's end at ", file.size_bytes, " bytes"));
    }
    return *location;
  }

 private:
  explicit WeightFileTable(const model::ModelFile& model) : model_(model) {}

  // A weight file as the runtime will map it: the executable outlives the
  // compiler's mapping, so the file must exist under its name.
  static absl::StatusOr<File> OnDisk(const std::string& path) {
    const std::string absolute = WeightFilePathAsNamed(path);
    std::error_code error;
    const uintmax_t size = std::filesystem::file_size(absolute, error);
    if (error) {
      return absl::NotFoundError(absl::StrCat(
          absolute, ": the weights' file cannot be referenced by the executable: ",
          error.message()));
    }
    return File{absolute, static_cast<uint64_t>(size)};
  }

  std::optional<Location> InShard(absl::Span<const uint8_t> bytes) const {
    const auto& shards = model_.safetensors->shards();
    for (size_t index = 0; index < shards.size(); ++index) {
      absl::Span<const uint8_t> mapping = shards[index].bytes();
      if (bytes.data() >= mapping.data() &&
          bytes.data() + bytes.size() <= mapping.data() + mapping.size()) {
        return Location{static_cast<uint32_t>(index),
                        static_cast<uint64_t>(bytes.data() - mapping.data())};
      }
    }
    return std::nullopt;
  }

  const model::ModelFile& model_;
  std::vector<File> files_;
};

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

// Whether the file at `path` holds exactly `bytes`.
bool FileHolds(const std::string& path, absl::Span<const uint8_t> bytes) {
  std::error_code error;
  if (std::filesystem::file_size(path, error) != bytes.size() || error) return false;
  absl::StatusOr<MappedFile> file = MappedFile::Open(path);
  return file.ok() && std::equal(bytes.begin(), bytes.end(), file->bytes().begin());
}

// The weights the compiler makes (fuse-projections' concatenations, the
// shifted weights, the weights repacked into another layout), laid out as
// their sidecar file: each at a 64-byte aligned offset, so that an
// f32 weight is read in place with aligned vector loads.
class Sidecar {
 public:
  static constexpr uint64_t kAlignment = 64;

  uint64_t Append(const std::vector<uint8_t>& weight) {
    bytes_.resize((bytes_.size() + kAlignment - 1) / kAlignment * kAlignment, 0);
    const uint64_t offset = bytes_.size();
    bytes_.insert(bytes_.end(), weight.begin(), weight.end());
    return offset;
  }
  bool empty() const { return bytes_.empty(); }

  // Writes the file at `path` unless it holds these very bytes already. A
  // file is only ever replaced whole (a temporary file and a rename), so
  // concurrent compiles into one path, which write the same bytes, each
  // succeed, and a process that maps the old file keeps reading it.
  absl::StatusOr<WeightFileTable::File> Write(const SidecarTarget& target) const {
    if (target.path.empty()) {
      return absl::FailedPreconditionError(
          "the program reads weights the compiler made (concatenations, shifted or repacked "
          "weights), but "
          "the executable writer was given no path for their sidecar file");
    }
    const std::filesystem::path written = WeightFilePathAsNamed(target.WritePath());
    if (!FileHolds(written.string(), bytes_)) {
      std::error_code error;
      if (written.has_parent_path()) {
        std::filesystem::create_directories(written.parent_path(), error);
      }
      KVJIT_RETURN_IF_ERROR(WriteFileAtomically(written.string(), bytes_));
    }
    return WeightFileTable::File{WeightFilePathAsNamed(target.path), bytes_.size()};
  }

 private:
  std::vector<uint8_t> bytes_;
};

// The writer's half of the lowering: the program's tensors, its instructions
// and the weight table, which each op's ExecutableLowerableOpInterface
// appends to.
class ExecutableBuilder final : public InstructionEmitter {
 public:
  ExecutableBuilder(const model::ModelFile& model, WeightFileTable weight_files,
                    SidecarTarget sidecar_target)
      : model_(model),
        weight_files_(std::move(weight_files)),
        sidecar_target_(std::move(sidecar_target)) {}

  absl::StatusOr<flatbuffers::DetachedBuffer> Build(mlir::func::FuncOp step,
                                                    const tokenizer::Vocabulary& vocabulary,
                                                    const std::string& chat_template,
                                                    const CudaSection* cuda) {
    KVJIT_RETURN_IF_ERROR(AddStepInputs(step));
    KVJIT_ASSIGN_OR_RETURN(Offset<kvx::Program> program, AddProgram(step));
    std::vector<WeightFileTable::File> weight_files = weight_files_.files();
    if (!sidecar_.empty()) {
      KVJIT_ASSIGN_OR_RETURN(WeightFileTable::File file, sidecar_.Write(sidecar_target_));
      weight_files.push_back(std::move(file));
    }
    KVJIT_ASSIGN_OR_RETURN(Offset<kvx::KvLayout> kv_layout, AddKvLayout(step));
    Offset<kvx::ModelConfig> config = AddModelConfig();
    Offset<kvx::Tokenizer> tokenizer = AddTokenizer(vocabulary, chat_template);
    std::vector<Offset<kvx::WeightFile>> files;
    for (const WeightFileTable::File& file : weight_files) {
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
        &weights_, kv_layout, program, cuda_module);
    kvx::FinishExecutableBuffer(fbb_, executable);
    return fbb_.Release();
  }

 private:
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

  // The model's weight `param` declares, checked against the declaration.
  absl::StatusOr<const model::WeightInfo*> ModelWeight(tfm::ParamOp param) {
    const std::string name = param.getSymName().str();
    const model::WeightInfo* weight = model_.weights->Find(name);
    if (weight == nullptr) {
      return absl::NotFoundError(absl::StrCat(model_.weights->origin(), ": tensor '", name,
                                              "', which the program reads, is not in the model"));
    }
    auto type = mlir::cast<mlir::RankedTensorType>(param.getType());
    if (type.getShape() != llvm::ArrayRef<int64_t>(weight->shape) ||
        tfm::ToQuantStorage(param.getStorage()) != weight->storage) {
      return absl::InvalidArgumentError(absl::StrCat(
          model_.weights->origin(), ": tensor '", name, "' is ",
          std::string(quant::StorageTypeName(weight->storage)), " of ", weight->shape.size(),
          " dims in the model but the IR declares ", Describe(type), " storage ",
          tfm::stringifyStorageType(param.getStorage()).str()));
    }
    absl::Span<const uint8_t> bytes = model_.weights->Bytes(*weight);
    if (bytes.size() != weight->size_bytes) {
      return absl::DataLossError(absl::StrCat(model_.weights->origin(), ": tensor '", name,
                                              "' has ", bytes.size(), " bytes, not ",
                                              weight->size_bytes));
    }
    return weight;
  }

  // A concatenation of the model's weights, rows after rows: a row of any
  // storage type is whole blocks, so the parts' bytes one after the other
  // are the concatenated matrix. Written to the sidecar.
  absl::Status AddConcatenatedWeightEntry(tfm::ParamOp param) {
    auto symbols = param->getParentOfType<mlir::ModuleOp>();
    std::vector<uint8_t> bytes;
    std::optional<quant::StorageType> storage;
    for (mlir::FlatSymbolRefAttr name : param.getConcat()->getAsRange<mlir::FlatSymbolRefAttr>()) {
      auto part = symbols.lookupSymbol<tfm::ParamOp>(name);
      if (!part) {
        return absl::InvalidArgumentError(absl::StrCat(
            "tfm.param @", param.getSymName().str(), " concatenates @", name.getValue().str(),
            ", which no tfm.param declares"));
      }
      KVJIT_ASSIGN_OR_RETURN(const model::WeightInfo* weight, ModelWeight(part));
      storage = weight->storage;
      absl::Span<const uint8_t> part_bytes = model_.weights->Bytes(*weight);
      bytes.insert(bytes.end(), part_bytes.begin(), part_bytes.end());
    }
    auto type = mlir::cast<mlir::RankedTensorType>(param.getType());
    const std::vector<int64_t> shape(type.getShape().begin(), type.getShape().end());
    return AddSidecarWeightEntry(param, runtime::ToKvxStorage(*storage), shape, std::move(bytes));
  }

  // The shift plus each of its source's values, added in f32 (Gemma's
  // 1 + w, as transformers computes it) and stored as f32 in the sidecar.
  absl::Status AddShiftedWeightEntry(tfm::ParamOp param) {
    const std::string name = param.getSymName().str();
    auto symbols = param->getParentOfType<mlir::ModuleOp>();
    auto source = symbols.lookupSymbol<tfm::ParamOp>(param.getShiftedAttr());
    if (!source) {
      return absl::InvalidArgumentError(absl::StrCat("tfm.param @", name, " shifts @",
                                                     param.getShiftedAttr().getValue().str(),
                                                     ", which no tfm.param declares"));
    }
    KVJIT_ASSIGN_OR_RETURN(const model::WeightInfo* weight, ModelWeight(source));
    std::vector<float> values(static_cast<size_t>(weight->element_count()));
    KVJIT_RETURN_IF_ERROR(model_.weights->ReadF32(*weight, absl::MakeSpan(values)));
    const float shift = param.getShiftAttr().getValue().convertToFloat();
    for (float& value : values) value = shift + value;
    std::vector<uint8_t> bytes(values.size() * sizeof(float));
    std::memcpy(bytes.data(), values.data(), bytes.size());
    return AddSidecarWeightEntry(param, kvx::StorageType::F32, weight->shape, std::move(bytes));
  }

  // A weight in the sidecar: `bytes` in GGUF's rows, repacked where the
  // param has another layout.
  absl::Status AddSidecarWeightEntry(tfm::ParamOp param, kvx::StorageType storage,
                                     const std::vector<int64_t>& shape, std::vector<uint8_t> bytes) {
    const std::string name = param.getSymName().str();
    const kvx::WeightLayout layout = LayoutOf(param);
    if (const std::string mismatch = kvx::LayoutMismatch(layout, storage, shape); !mismatch.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("tfm.param @", name, ": ", mismatch));
    }
    if (layout == kvx::WeightLayout::RowsInterleaved8) {
      // Whole 32-element blocks, rows back to back (LayoutMismatch).
      const int64_t blocks_per_row = shape[1] / 32;
      const uint64_t block_bytes = bytes.size() / static_cast<uint64_t>(shape[0] * blocks_per_row);
      bytes = kvx::InterleaveRows(bytes.data(), shape[0], blocks_per_row, block_bytes);
    }
    const uint32_t sidecar_index = static_cast<uint32_t>(weight_files_.files().size());
    const uint64_t checksum = runtime::Fnv1a64(bytes);
    const uint64_t offset = sidecar_.Append(bytes);
    weights_.push_back(kvx::CreateWeightDirect(fbb_, name.c_str(), storage, &shape, sidecar_index, offset,
                                               bytes.size(), checksum, layout));
    return absl::OkStatus();
  }

  static kvx::WeightLayout LayoutOf(tfm::ParamOp param) {
    return param.getLayout() == tfm::WeightLayout::rows_interleaved8 ? kvx::WeightLayout::RowsInterleaved8
                                                                      : kvx::WeightLayout::Gguf;
  }

  absl::Status AddWeightEntry(tfm::ParamOp param) {
    if (param.getConcat()) return AddConcatenatedWeightEntry(param);
    if (param.getShifted()) return AddShiftedWeightEntry(param);
    const std::string name = param.getSymName().str();
    KVJIT_ASSIGN_OR_RETURN(const model::WeightInfo* weight, ModelWeight(param));
    absl::Span<const uint8_t> bytes = model_.weights->Bytes(*weight);
    if (LayoutOf(param) != kvx::WeightLayout::Gguf) {
      return AddSidecarWeightEntry(param, runtime::ToKvxStorage(weight->storage), weight->shape,
                                   std::vector<uint8_t>(bytes.begin(), bytes.end()));
    }
    KVJIT_ASSIGN_OR_RETURN(WeightFileTable::Location location, weight_files_.Locate(*weight));
    weights_.push_back(kvx::CreateWeightDirect(fbb_, name.c_str(),
                                               runtime::ToKvxStorage(weight->storage),
                                               &weight->shape, location.file_index,
                                               location.offset, weight->size_bytes,
                                               runtime::Fnv1a64(bytes)));
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
    KVJIT_ASSIGN_OR_RETURN(kvx::StorageType element, CacheElementStorage(cache.getElementType()));
    return kvx::CreateKvLayout(
        fbb_, static_cast<uint32_t>(cache.getLayers()), static_cast<uint32_t>(cache.getKvHeads()),
        static_cast<uint32_t>(cache.getHeadDim()), static_cast<uint32_t>(layout.getBlockSize()),
        element, static_cast<uint64_t>(layout.getBlockBytes()),
        static_cast<uint64_t>(layout.getLayerStrideBytes()),
        static_cast<uint64_t>(layout.getValueOffsetBytes()),
        static_cast<uint64_t>(layout.getSlotStrideBytes()), static_cast<uint64_t>(layout.getBlocks()));
  }

  Offset<kvx::ModelConfig> AddModelConfig() {
    const model::ModelConfig& config = model_.config;
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
        static_cast<uint32_t>(config.intermediate_size), static_cast<uint32_t>(config.num_layers),
        static_cast<uint32_t>(config.num_heads), static_cast<uint32_t>(config.num_kv_heads),
        static_cast<uint32_t>(config.head_dim), static_cast<uint32_t>(config.context_length),
        static_cast<float>(config.rms_norm_eps), static_cast<float>(config.rope_theta),
        ToKvxRopeStyle(config.rope_style), rope_scaling, config.tied_embeddings,
        config.qkv_bias);
  }

  Offset<kvx::Tokenizer> AddTokenizer(const tokenizer::Vocabulary& vocabulary,
                                      const std::string& chat_template) {
    std::vector<Offset<flatbuffers::String>> tokens;
    tokens.reserve(vocabulary.tokens.size());
    for (const std::string& token : vocabulary.tokens) tokens.push_back(fbb_.CreateString(token));
    std::vector<int32_t> token_types;
    token_types.reserve(vocabulary.token_types.size());
    for (tokenizer::TokenType type : vocabulary.token_types) {
      token_types.push_back(static_cast<int32_t>(type));
    }
    // "left right", as GGUF's tokenizer.ggml.merges spells them: byte-level
    // alphabets spell a space as another character, so the first space
    // splits the pair.
    std::vector<Offset<flatbuffers::String>> merges;
    merges.reserve(vocabulary.merges.size());
    for (const auto& [left, right] : vocabulary.merges) {
      merges.push_back(fbb_.CreateString(absl::StrCat(left, " ", right)));
    }
    const bool byte_level = vocabulary.model == tokenizer::TokenizerModel::kByteLevelBpe;
    return kvx::CreateTokenizerDirect(
        fbb_, byte_level ? kvx::TokenizerKind::ByteLevelBpe : kvx::TokenizerKind::SentencePiece,
        byte_level ? PreTokenizerName(vocabulary.pre_tokenizer) : nullptr, &tokens, &vocabulary.scores, &token_types,
        &merges, vocabulary.bos_id, vocabulary.eos_id, vocabulary.end_of_turn_id,
        vocabulary.unknown_id, vocabulary.padding_id, vocabulary.add_bos_token,
        vocabulary.add_eos_token, vocabulary.add_space_prefix, chat_template.c_str());
  }

  const model::ModelFile& model_;
  WeightFileTable weight_files_;
  SidecarTarget sidecar_target_;
  Sidecar sidecar_;
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
    const SidecarTarget& sidecar, const CudaSection* cuda) {
  KVJIT_ASSIGN_OR_RETURN(mlir::func::FuncOp step, FindStepFunction(planned_module));
  KVJIT_RETURN_IF_ERROR(RequirePlan(step));
  KVJIT_RETURN_IF_ERROR(VerifyPlan(step));
  EnsureLoweringModels(*planned_module.getContext());
  KVJIT_ASSIGN_OR_RETURN(WeightFileTable weight_files, WeightFileTable::ForModel(model));
  ExecutableBuilder builder(model, std::move(weight_files), sidecar);
  return builder.Build(step, vocabulary, chat_template, cuda);
}

std::string WeightFilePathAsNamed(const std::string& path) {
  std::error_code error;
  std::filesystem::path absolute = std::filesystem::absolute(path, error);
  return error ? path : absolute.lexically_normal().string();
}

std::string SidecarPathFor(const std::string& executable_path) {
  constexpr absl::string_view kExtension = ".kvx";
  if (absl::EndsWith(executable_path, kExtension)) {
    return absl::StrCat(executable_path.substr(0, executable_path.size() - kExtension.size()),
                        ".kvw");
  }
  return absl::StrCat(executable_path, ".kvw");
}

absl::Status WriteExecutableFile(const flatbuffers::DetachedBuffer& executable,
                                 const std::string& path) {
  return WriteFileAtomically(path, absl::MakeConstSpan(executable.data(), executable.size()));
}

}  // namespace kvjit::codegen
