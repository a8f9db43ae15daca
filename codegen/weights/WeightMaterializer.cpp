#include "codegen/weights/WeightMaterializer.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "ir/Tfm/TfmStorage.h"
#include "runtime/core/AtomicFile.h"
#include "runtime/core/MappedFile.h"
#include "runtime/core/StatusMacros.h"
#include "runtime/exec/KvxTypes.h"
#include "runtime/quant/StorageType.h"
#include "runtime/schema/WeightLayout.h"

namespace kvjit::codegen {
namespace {

kvx::WeightLayout LayoutOf(tfm::ParamOp param) {
  return param.getLayout() == tfm::WeightLayout::rows_interleaved8
             ? kvx::WeightLayout::RowsInterleaved8
             : kvx::WeightLayout::Gguf;
}

// Whether the file at `path` holds exactly `bytes`.
bool FileHolds(const std::string& path, absl::Span<const uint8_t> bytes) {
  std::error_code error;
  if (std::filesystem::file_size(path, error) != bytes.size() || error) return false;
  absl::StatusOr<MappedFile> file = MappedFile::Open(path);
  return file.ok() && std::equal(bytes.begin(), bytes.end(), file->bytes().begin());
}

}  // namespace

std::string SidecarPathFor(const std::string& executable_path) {
  constexpr absl::string_view kExtension = ".kvx";
  if (absl::EndsWith(executable_path, kExtension)) {
    return absl::StrCat(executable_path.substr(0, executable_path.size() - kExtension.size()),
                        ".kvw");
  }
  return absl::StrCat(executable_path, ".kvw");
}

bool WeightMaterializer::Derives(tfm::ParamOp param) {
  return param.getConcat() || param.getShifted() || LayoutOf(param) != kvx::WeightLayout::Gguf ||
         (param.getSliced() && !SourceWeights::ReadsRowsInPlace(param));
}

absl::StatusOr<WeightEntry> WeightMaterializer::Materialize(tfm::ParamOp param) {
  if (param.getConcat()) return Concatenation(param);
  if (param.getShifted()) return Shifted(param);
  KVJIT_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, StoredBytes(param));
  auto type = mlir::cast<mlir::RankedTensorType>(param.getType());
  return Append(param, runtime::ToKvxStorage(tfm::ToQuantStorage(param.getStorage())),
                std::vector<int64_t>(type.getShape().begin(), type.getShape().end()),
                std::move(bytes));
}

// A block-quantized row is whole blocks, so a slice that begins and ends on
// block boundaries (verified) is the bytes of its blocks in each row.
absl::StatusOr<std::vector<uint8_t>> WeightMaterializer::StoredBytes(tfm::ParamOp param) const {
  if (!param.getSliced()) {
    KVJIT_ASSIGN_OR_RETURN(const model::WeightInfo* weight, sources_.Declared(param));
    absl::Span<const uint8_t> bytes = sources_.weights().Bytes(*weight);
    return std::vector<uint8_t>(bytes.begin(), bytes.end());
  }
  KVJIT_ASSIGN_OR_RETURN(tfm::ParamOp source, sources_.SliceSource(param));
  KVJIT_ASSIGN_OR_RETURN(const model::WeightInfo* weight, sources_.Declared(source));
  absl::Span<const uint8_t> bytes = sources_.weights().Bytes(*weight);
  // A slice that splits blocks is of the source's values dequantized.
  std::vector<uint8_t> dequantized;
  quant::StorageType storage = weight->storage;
  if (param.getStorage() != source.getStorage()) {
    std::vector<float> values(static_cast<size_t>(weight->element_count()));
    KVJIT_RETURN_IF_ERROR(sources_.weights().ReadF32(*weight, absl::MakeSpan(values)));
    dequantized.resize(values.size() * sizeof(float));
    std::memcpy(dequantized.data(), values.data(), dequantized.size());
    bytes = dequantized;
    storage = quant::StorageType::kF32;
  }
  auto type = mlir::cast<mlir::RankedTensorType>(source.getType());
  // A vector is one row; its slice is of that row's elements.
  const int64_t rows = type.getRank() == 2 ? type.getDimSize(0) : 1;
  const int64_t width = type.getShape().back();
  const bool of_rows = type.getRank() == 2 && *param.getSliceAxis() == 0;
  const int64_t from = *param.getSliceFrom();
  const int64_t size = mlir::cast<mlir::RankedTensorType>(param.getType())
                           .getDimSize(*param.getSliceAxis());
  const uint64_t row_bytes = bytes.size() / static_cast<uint64_t>(rows);
  if (of_rows) {
    return std::vector<uint8_t>(bytes.begin() + from * row_bytes,
                                bytes.begin() + (from + size) * row_bytes);
  }
  const int64_t block = quant::ElementsPerBlock(storage);
  const uint64_t block_bytes = row_bytes / static_cast<uint64_t>(width / block);
  const uint64_t begin = static_cast<uint64_t>(from / block) * block_bytes;
  const uint64_t length = static_cast<uint64_t>(size / block) * block_bytes;
  std::vector<uint8_t> sliced;
  sliced.reserve(static_cast<size_t>(rows) * length);
  for (int64_t r = 0; r < rows; ++r) {
    const auto row = bytes.begin() + r * row_bytes;
    sliced.insert(sliced.end(), row + begin, row + begin + length);
  }
  return sliced;
}

// A row of any storage type is whole blocks, so the parts' bytes one after
// the other are the matrix of their rows one after the other.
absl::StatusOr<WeightEntry> WeightMaterializer::Concatenation(tfm::ParamOp param) {
  auto symbols = param->getParentOfType<mlir::ModuleOp>();
  std::vector<uint8_t> bytes;
  std::optional<quant::StorageType> storage;
  for (mlir::FlatSymbolRefAttr name : param.getConcat()->getAsRange<mlir::FlatSymbolRefAttr>()) {
    auto part = symbols.lookupSymbol<tfm::ParamOp>(name);
    if (!part) {
      return absl::InvalidArgumentError(absl::StrCat("tfm.param @", param.getSymName().str(),
                                                     " concatenates @", name.getValue().str(),
                                                     ", which no tfm.param declares"));
    }
    storage = tfm::ToQuantStorage(part.getStorage());
    KVJIT_ASSIGN_OR_RETURN(std::vector<uint8_t> part_bytes, StoredBytes(part));
    bytes.insert(bytes.end(), part_bytes.begin(), part_bytes.end());
  }
  auto type = mlir::cast<mlir::RankedTensorType>(param.getType());
  const std::vector<int64_t> shape(type.getShape().begin(), type.getShape().end());
  return Append(param, runtime::ToKvxStorage(*storage), shape, std::move(bytes));
}

// The shift plus each of its source's values, added in f32 (Gemma's 1 + w,
// as transformers computes it) and stored as f32.
absl::StatusOr<WeightEntry> WeightMaterializer::Shifted(tfm::ParamOp param) {
  const std::string name = param.getSymName().str();
  auto symbols = param->getParentOfType<mlir::ModuleOp>();
  auto source = symbols.lookupSymbol<tfm::ParamOp>(param.getShiftedAttr());
  if (!source) {
    return absl::InvalidArgumentError(absl::StrCat("tfm.param @", name, " shifts @",
                                                   param.getShiftedAttr().getValue().str(),
                                                   ", which no tfm.param declares"));
  }
  KVJIT_ASSIGN_OR_RETURN(const model::WeightInfo* weight, sources_.Declared(source));
  std::vector<float> values(static_cast<size_t>(weight->element_count()));
  KVJIT_RETURN_IF_ERROR(sources_.weights().ReadF32(*weight, absl::MakeSpan(values)));
  const float shift = param.getShiftAttr().getValue().convertToFloat();
  for (float& value : values) value = shift + value;
  std::vector<uint8_t> bytes(values.size() * sizeof(float));
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return Append(param, kvx::StorageType::F32, weight->shape, std::move(bytes));
}

// `bytes`, in GGUF's rows, repacked where the param has another layout.
absl::StatusOr<WeightEntry> WeightMaterializer::Append(tfm::ParamOp param,
                                                       kvx::StorageType storage,
                                                       const std::vector<int64_t>& shape,
                                                       std::vector<uint8_t> bytes) {
  const kvx::WeightLayout layout = LayoutOf(param);
  if (const std::string mismatch = kvx::LayoutMismatch(layout, storage, shape); !mismatch.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("tfm.param @", param.getSymName().str(), ": ", mismatch));
  }
  if (layout == kvx::WeightLayout::RowsInterleaved8) {
    // Whole 32-element blocks, rows back to back (LayoutMismatch).
    const int64_t blocks_per_row = shape[1] / 32;
    const uint64_t block_bytes = bytes.size() / static_cast<uint64_t>(shape[0] * blocks_per_row);
    bytes = kvx::InterleaveRows(bytes.data(), shape[0], blocks_per_row, block_bytes);
  }
  sidecar_.resize((sidecar_.size() + kAlignment - 1) / kAlignment * kAlignment, 0);
  const uint64_t offset = sidecar_.size();
  sidecar_.insert(sidecar_.end(), bytes.begin(), bytes.end());
  const uint32_t sidecar_index = static_cast<uint32_t>(sources_.files().size());
  return WeightEntry{storage, shape, sidecar_index, offset, bytes.size(), runtime::Fnv1a64(bytes),
                     layout};
}

// A file is only ever replaced whole (a temporary file and a rename), so
// concurrent compiles into one path, which write the same bytes, each
// succeed, and a process that maps the old file keeps reading it.
absl::StatusOr<std::optional<WeightFile>> WeightMaterializer::WriteSidecar(
    const SidecarTarget& target) const {
  if (sidecar_.empty()) return std::nullopt;
  if (target.path.empty()) {
    return absl::FailedPreconditionError(
        "the program reads weights the compiler made (concatenations, shifted or repacked "
        "weights), but the executable writer was given no path for their sidecar file");
  }
  const std::filesystem::path written = WeightFilePathAsNamed(target.WritePath());
  if (!FileHolds(written.string(), sidecar_)) {
    std::error_code error;
    if (written.has_parent_path()) {
      std::filesystem::create_directories(written.parent_path(), error);
    }
    KVJIT_RETURN_IF_ERROR(WriteFileAtomically(written.string(), sidecar_));
  }
  return WeightFile{WeightFilePathAsNamed(target.path), sidecar_.size()};
}

}  // namespace kvjit::codegen
