#include "codegen/weights/SourceWeights.h"

#include "mlir/IR/SymbolTable.h"

#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "ir/Tfm/TfmStorage.h"
#include "llvm/Support/raw_ostream.h"
#include "runtime/core/StatusMacros.h"
#include "runtime/exec/KvxTypes.h"

namespace kvjit::codegen {
namespace {

std::string Describe(mlir::Type type) {
  std::string text;
  llvm::raw_string_ostream stream(text);
  stream << type;
  return text;
}

// A weight file as the runtime will map it: the executable outlives the
// compiler's mapping, so the file must exist under its name.
absl::StatusOr<WeightFile> OnDisk(const std::string& path) {
  const std::string absolute = WeightFilePathAsNamed(path);
  std::error_code error;
  const uintmax_t size = std::filesystem::file_size(absolute, error);
  if (error) {
    return absl::NotFoundError(absl::StrCat(
        absolute, ": the weights' file cannot be referenced by the executable: ",
        error.message()));
  }
  return WeightFile{absolute, static_cast<uint64_t>(size)};
}

}  // namespace

absl::StatusOr<SourceWeights> SourceWeights::ForModel(const model::ModelFile& model) {
  SourceWeights sources(model);
  if (model.gguf_files != nullptr) {
    for (const std::unique_ptr<gguf::GgufFile>& part : model.gguf_files->parts()) {
      KVJIT_ASSIGN_OR_RETURN(WeightFile file, OnDisk(part->path()));
      sources.files_.push_back(std::move(file));
    }
  } else if (model.safetensors != nullptr) {
    for (const safetensors::SafetensorsFile& shard : model.safetensors->shards()) {
      sources.files_.push_back({WeightFilePathAsNamed(shard.path()), shard.bytes().size()});
    }
  }
  return sources;
}

absl::StatusOr<const model::WeightInfo*> SourceWeights::Declared(tfm::ParamOp param) const {
  const std::string name = param.getSymName().str();
  const model::WeightSource& weights = *model_->weights;
  const model::WeightInfo* weight = weights.Find(name);
  if (weight == nullptr) {
    return absl::NotFoundError(absl::StrCat(weights.origin(), ": tensor '", name,
                                            "', which the program reads, is not in the model"));
  }
  auto type = mlir::cast<mlir::RankedTensorType>(param.getType());
  if (type.getShape() != llvm::ArrayRef<int64_t>(weight->shape) ||
      tfm::ToQuantStorage(param.getStorage()) != weight->storage) {
    return absl::InvalidArgumentError(absl::StrCat(
        weights.origin(), ": tensor '", name, "' is ",
        std::string(quant::StorageTypeName(weight->storage)), " of ", weight->shape.size(),
        " dims in the model but the IR declares ", Describe(type), " storage ",
        tfm::stringifyStorageType(param.getStorage()).str()));
  }
  absl::Span<const uint8_t> bytes = weights.Bytes(*weight);
  if (bytes.size() != weight->size_bytes) {
    return absl::DataLossError(absl::StrCat(weights.origin(), ": tensor '", name, "' has ",
                                            bytes.size(), " bytes, not ", weight->size_bytes));
  }
  return weight;
}

bool SourceWeights::ReadsRowsInPlace(tfm::ParamOp param) {
  if (!param.getSliced() || *param.getSliceAxis() != 0) return false;
  auto source = mlir::SymbolTable::lookupNearestSymbolFrom<tfm::ParamOp>(param,
                                                                       param.getSlicedAttr());
  return source && source.isModelWeight() &&
         mlir::cast<mlir::RankedTensorType>(param.getType()).getRank() == 2;
}

absl::StatusOr<tfm::ParamOp> SourceWeights::SliceSource(tfm::ParamOp slice) const {
  auto source = mlir::SymbolTable::lookupNearestSymbolFrom<tfm::ParamOp>(slice,
                                                                       slice.getSlicedAttr());
  if (!source || !source.isModelWeight()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tfm.param @", slice.getSymName().str(), " slices @",
        slice.getSlicedAttr().getValue().str(), ", which is not a weight of the model"));
  }
  return source;
}

absl::StatusOr<WeightEntry> SourceWeights::Locate(tfm::ParamOp param) const {
  if (param.getSliced()) {
    KVJIT_ASSIGN_OR_RETURN(tfm::ParamOp source, SliceSource(param));
    KVJIT_ASSIGN_OR_RETURN(WeightEntry whole, Locate(source));
    const uint64_t row_bytes = whole.size_bytes / static_cast<uint64_t>(whole.shape[0]);
    const auto rows = static_cast<uint64_t>(
        mlir::cast<mlir::RankedTensorType>(param.getType()).getDimSize(0));
    const uint64_t skipped = static_cast<uint64_t>(*param.getSliceFrom()) * row_bytes;
    KVJIT_ASSIGN_OR_RETURN(const model::WeightInfo* weight, Declared(source));
    absl::Span<const uint8_t> bytes =
        weights().Bytes(*weight).subspan(skipped, rows * row_bytes);
    return WeightEntry{whole.storage,
                       {static_cast<int64_t>(rows), whole.shape[1]},
                       whole.file_index,
                       whole.offset + skipped,
                       bytes.size(),
                       runtime::Fnv1a64(bytes)};
  }
  KVJIT_ASSIGN_OR_RETURN(const model::WeightInfo* weight, Declared(param));
  KVJIT_ASSIGN_OR_RETURN(Location location, LocationOf(*weight));
  return WeightEntry{runtime::ToKvxStorage(weight->storage),
                     weight->shape,
                     location.file_index,
                     location.offset,
                     weight->size_bytes,
                     runtime::Fnv1a64(weights().Bytes(*weight))};
}

absl::StatusOr<SourceWeights::Location> SourceWeights::LocationOf(
    const model::WeightInfo& weight) const {
  std::optional<Location> location;
  if (model_->gguf_files != nullptr) {
    if (auto located = model_->gguf_files->FindTensor(weight.name)) {
      location = Location{static_cast<uint32_t>(located->part), located->tensor->file_offset};
    }
  } else if (model_->safetensors != nullptr) {
    location = InShard(weights().Bytes(weight));
  } else {
    return absl::FailedPreconditionError(absl::StrCat(
        model_->weights->origin(), ": tensor '", weight.name,
        "' is not in a file; an executable references weights by file and offset, so "
        "compile from a GGUF file or a safetensors checkpoint"));
  }
  if (!location) {
    return absl::NotFoundError(absl::StrCat(model_->path, ": tensor '", weight.name,
                                            "' is not in any of the model's files"));
  }
  const WeightFile& file = files_[location->file_index];
  if (location->offset > file.size_bytes || weight.size_bytes > file.size_bytes - location->offset) {
    return absl::OutOfRangeError(absl::StrCat(
        file.path, ": tensor '", weight.name, "' (", weight.size_bytes, " bytes at offset ",
        location->offset, ") runs past the file's end at ", file.size_bytes, " bytes"));
  }
  return *location;
}

std::optional<SourceWeights::Location> SourceWeights::InShard(
    absl::Span<const uint8_t> bytes) const {
  const auto& shards = model_->safetensors->shards();
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

std::string WeightFilePathAsNamed(const std::string& path) {
  std::error_code error;
  std::filesystem::path absolute = std::filesystem::absolute(path, error);
  return error ? path : absolute.lexically_normal().string();
}

}  // namespace kvjit::codegen
