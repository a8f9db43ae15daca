#include "runtime/exec/Executable.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/core/StatusMacros.h"
#include "runtime/exec/KvxTypes.h"
#include "runtime/exec/OpTable.h"
#include "runtime/schema/KvCacheFormat.h"
#include "runtime/schema/SchemaVersion.h"
#include "runtime/schema/WeightLayout.h"

namespace kvjit::runtime {
namespace {

// Elements of a dimension at its largest (the static size, or the program's
// token bound for per-step sizes); -1 for a negative static size.
int64_t MaxExtent(const kvx::Dim& dim, int64_t max_tokens) {
  switch (dim.kind()) {
    case kvx::DimKind::Static:
      return dim.size() >= 0 ? dim.size() : -1;
    case kvx::DimKind::SequencesPlusOne:
      return max_tokens + 1;
    default:
      return max_tokens;
  }
}

}  // namespace

int64_t DimExtent(kvx::DimKind kind, int64_t static_size, const StepSizes& sizes) {
  switch (kind) {
    case kvx::DimKind::Static:
      return static_size;
    case kvx::DimKind::Tokens:
      return sizes.tokens;
    case kvx::DimKind::LogitsRows:
      return sizes.logits_rows;
    case kvx::DimKind::Sequences:
      return sizes.sequences;
    case kvx::DimKind::MaxBlocks:
      return sizes.max_blocks;
    case kvx::DimKind::SequencesPlusOne:
      return sizes.sequences + 1;
  }
  return 0;
}

int64_t SizeProduct(const flatbuffers::Vector<const kvx::SizeFactor*>* factors,
                    const StepSizes& sizes) {
  int64_t product = 1;
  if (factors == nullptr) return product;
  for (const kvx::SizeFactor* factor : *factors) {
    const int64_t extent = DimExtent(factor->kind(), factor->size(), sizes);
    const int64_t divisor = factor->divisor();
    product *= (extent + divisor - 1) / divisor;
  }
  return product;
}

uint64_t ScratchBytes(const kvx::CudaPath& path, const StepSizes& sizes) {
  const bool per_step = path.scratch_bytes() != nullptr && path.scratch_bytes()->size() > 0;
  return path.scratch_fixed_bytes() +
         (per_step ? static_cast<uint64_t>(SizeProduct(path.scratch_bytes(), sizes)) : 0);
}

absl::StatusOr<std::unique_ptr<Executable>> Executable::Load(const std::string& path,
                                                              const LoadOptions& options) {
  std::unique_ptr<Executable> executable(new Executable(path));
  KVJIT_ASSIGN_OR_RETURN(MappedFile file, MappedFile::Open(path));
  executable->file_ = std::make_unique<MappedFile>(std::move(file));
  KVJIT_RETURN_IF_ERROR(executable->Verify(options.tensor_parallel_rank));
  KVJIT_RETURN_IF_ERROR(executable->MapWeights(options));
  KVJIT_RETURN_IF_ERROR(executable->VerifyProgram());
  return executable;
}

// Rank 0's program is the file's root; the others are nested in it, each a
// whole executable, verified with the root.
absl::Status Executable::SelectRank(int rank) {
  const kvx::TensorParallel* parallel = root_->tensor_parallel();
  const uint32_t ranks = parallel != nullptr ? parallel->ranks() : 1;
  if (rank < 0 || static_cast<uint32_t>(rank) >= ranks) {
    return absl::InvalidArgumentError(absl::StrCat(
        path_, ": holds ", ranks == 1 ? "one program, for one process" :
                                        absl::StrCat("the programs of ", ranks, " ranks"),
        "; rank ", rank, " has none"));
  }
  if (rank == 0) return absl::OkStatus();
  const auto* others = parallel->other_ranks();
  if (others == nullptr || others->size() != ranks - 1) {
    return absl::InvalidArgumentError(absl::StrCat(path_, ": is split over ", ranks,
                                                   " ranks but holds the programs of ",
                                                   others ? others->size() + 1 : 1));
  }
  root_ = others->Get(rank - 1)->executable_nested_root();
  const kvx::TensorParallel* own = root_->tensor_parallel();
  if (own == nullptr || own->ranks() != ranks || own->rank() != static_cast<uint32_t>(rank)) {
    return absl::InvalidArgumentError(
        absl::StrCat(path_, ": the program stored for rank ", rank, " is not marked as that rank's"));
  }
  return absl::OkStatus();
}

absl::Status Executable::Verify(int tensor_parallel_rank) {
  absl::Span<const uint8_t> bytes = file_->bytes();
  auto invalid = [&](auto... parts) {
    return absl::InvalidArgumentError(absl::StrCat(path_, ": ", parts...));
  };
  if (bytes.size() < 8 || !kvx::ExecutableBufferHasIdentifier(bytes.data())) {
    return invalid("not a kvjit executable (no 'KVJX' identifier); compile one with "
                   "`kvjit compile`");
  }
  flatbuffers::Verifier verifier(bytes.data(), bytes.size());
  if (!kvx::VerifyExecutableBuffer(verifier)) {
    return invalid("the executable is truncated or corrupt (FlatBuffer verification failed)");
  }
  root_ = kvx::GetExecutable(bytes.data());
  KVJIT_RETURN_IF_ERROR(SelectRank(tensor_parallel_rank));
  if (root_->schema_version() != kvx::kSchemaVersion) {
    return invalid("schema version ", root_->schema_version(), " is not this runtime's ",
                   kvx::kSchemaVersion, "; recompile the model with this kvjit");
  }
  if (root_->program() == nullptr || root_->program()->instructions() == nullptr) {
    return invalid("field 'program' is missing");
  }
  if (root_->kv_layout() == nullptr) return invalid("field 'kv_layout' is missing");
  if (root_->weights() == nullptr || root_->weight_files() == nullptr) {
    return invalid("field 'weights' or 'weight_files' is missing");
  }
  const kvx::KvLayout& kv = *root_->kv_layout();
  if (kv.block_size() == 0 || kv.num_layers() == 0 || kv.num_kv_heads() == 0 ||
      kv.head_dim() == 0 || kv.bytes_per_block() == 0) {
    return invalid("field 'kv_layout' has a zero dimension");
  }
  if (root_->program()->max_tokens() == 0) return invalid("field 'program.max_tokens' is zero");
  // The runtime's kernels address the pool with these strides; a layout they
  // do not describe must not load.
  const kvx::KvCacheFormat* key_format = kvx::FindKvCacheFormat(kv.key_type());
  const kvx::KvCacheFormat* value_format = kvx::FindKvCacheFormat(kv.value_type());
  if (key_format == nullptr || value_format == nullptr) {
    return invalid(absl::StrCat("kv_layout keeps keys as ", kvx::EnumNameStorageType(kv.key_type()),
                                " and values as ", kvx::EnumNameStorageType(kv.value_type()),
                                "; a KV cache holds ", kvx::kKvCacheFormatNames));
  }
  const std::optional<uint64_t> key_slot = kvx::KvSlotBytes(*key_format, kv.num_kv_heads(), kv.head_dim());
  const std::optional<uint64_t> value_slot =
      kvx::KvSlotBytes(*value_format, kv.num_kv_heads(), kv.head_dim());
  if (!key_slot || !value_slot) {
    return invalid(absl::StrCat("kv_layout's head_dim ", kv.head_dim(), " is not a whole number of ",
                                key_slot ? value_format->name : key_format->name, " blocks"));
  }
  if (!kvx::IsValidRotation(kv.key_rotation(), kv.head_dim()) ||
      !kvx::IsValidRotation(kv.value_rotation(), kv.head_dim())) {
    return invalid(absl::StrCat("kv_layout rotates keys in blocks of ", kv.key_rotation(), " and values in blocks of ",
                                kv.value_rotation(), "; each must be 0 or a power of two dividing head_dim ",
                                kv.head_dim()));
  }
  const uint64_t value_offset = *key_slot * kv.block_size();
  const uint64_t layer_stride = value_offset + *value_slot * kv.block_size();
  if (kv.key_slot_stride_bytes() != *key_slot || kv.value_slot_stride_bytes() != *value_slot ||
      kv.value_offset_bytes() != value_offset || kv.layer_stride_bytes() != layer_stride ||
      kv.bytes_per_block() != layer_stride * kv.num_layers()) {
    return invalid("kv_layout's strides are not the [layer][keys, values][slot][head][dim] layout "
                   "this runtime reads");
  }
  if (root_->config()->vocab_size() == 0) return invalid("field 'config.vocab_size' is zero");
  return absl::OkStatus();
}

absl::Status Executable::MapWeights(const LoadOptions& options) {
  for (const kvx::WeightFile* weight_file : *root_->weight_files()) {
    const auto staged = options.staged_weight_files.find(weight_file->path()->str());
    absl::StatusOr<MappedFile> mapped = MappedFile::Open(
        staged != options.staged_weight_files.end() ? staged->second : weight_file->path()->str());
    if (!mapped.ok()) {
      return absl::Status(mapped.status().code(),
                          absl::StrCat(path_, ": weight file: ", mapped.status().message()));
    }
    if (mapped->bytes().size() != weight_file->size_bytes()) {
      return absl::FailedPreconditionError(absl::StrCat(
          path_, ": weight file ", weight_file->path()->str(), " has ", mapped->bytes().size(),
          " bytes, but the executable was compiled against ", weight_file->size_bytes()));
    }
    weight_files_.push_back(*std::move(mapped));
  }
  for (const kvx::Weight* weight : *root_->weights()) {
    if (weight->file_index() >= weight_files_.size()) {
      return absl::InvalidArgumentError(absl::StrCat(path_, ": weight '", weight->name()->str(),
                                                     "' names file ", weight->file_index(),
                                                     " of ", weight_files_.size()));
    }
    absl::Span<const uint8_t> file = weight_files_[weight->file_index()].bytes();
    if (weight->offset() > file.size() || weight->size_bytes() > file.size() - weight->offset()) {
      return absl::InvalidArgumentError(absl::StrCat(
          path_, ": weight '", weight->name()->str(), "' at offset ", weight->offset(), " (",
          weight->size_bytes(), " bytes) lies past the end of its file"));
    }
    const std::vector<int64_t> shape =
        weight->shape() == nullptr ? std::vector<int64_t>()
                                   : std::vector<int64_t>(weight->shape()->begin(), weight->shape()->end());
    if (const std::string mismatch = kvx::LayoutMismatch(weight->layout(), weight->storage(), shape);
        !mismatch.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path_, ": weight '", weight->name()->str(), "': ", mismatch));
    }
    absl::Span<const uint8_t> bytes = file.subspan(weight->offset(), weight->size_bytes());
    if (options.verify_weight_checksums && Fnv1a64(bytes) != weight->checksum()) {
      return absl::DataLossError(absl::StrCat(
          path_, ": weight '", weight->name()->str(), "' in ",
          root_->weight_files()->Get(weight->file_index())->path()->str(),
          " is not the one the executable was compiled from (checksum mismatch); recompile"));
    }
    weight_bytes_.push_back(bytes);
  }
  return absl::OkStatus();
}

absl::Status Executable::VerifyTensorRef(const kvx::TensorRef* ref, size_t instruction,
                                         const char* role) const {
  auto invalid = [&](auto... parts) {
    return absl::InvalidArgumentError(
        absl::StrCat(path_, ": instruction ", instruction, " ", role, ": ", parts...));
  };
  if (ref == nullptr || ref->shape() == nullptr) return invalid("missing tensor reference");
  const int64_t max_tokens = program().max_tokens();
  switch (ref->kind()) {
    case kvx::BufferKind::Arena: {
      uint64_t bytes = sizeof(float);
      for (const kvx::Dim* dim : *ref->shape()) {
        const int64_t extent = MaxExtent(*dim, max_tokens);
        if (extent < 0 || __builtin_mul_overflow(bytes, static_cast<uint64_t>(extent), &bytes)) {
          return invalid("a dimension is negative or the size overflows");
        }
      }
      if (ref->row_stride() != 0) {
        // A view spans its rows at the stride, the last one only its own width.
        const int64_t rows = ref->shape()->size() < 2 ? 0 : MaxExtent(*ref->shape()->Get(0), max_tokens);
        const uint64_t row_bytes = rows > 0 ? bytes / static_cast<uint64_t>(rows) : 0;
        uint64_t span = 0;
        if (rows <= 0 || ref->row_stride() * sizeof(float) < row_bytes ||
            __builtin_mul_overflow(static_cast<uint64_t>(rows - 1),
                                   ref->row_stride() * sizeof(float), &span) ||
            __builtin_add_overflow(span, row_bytes, &bytes)) {
          return invalid("row stride ", ref->row_stride(),
                         " does not view whole rows of a tensor of rank 2 or more");
        }
      }
      if (ref->offset() % sizeof(float) != 0) {
        return invalid("arena offset ", ref->offset(), " is not a multiple of 4");
      }
      if (ref->offset() > program().arena_bytes() ||
          bytes > program().arena_bytes() - ref->offset()) {
        return invalid("arena bytes [", ref->offset(), ", ", ref->offset() + bytes,
                       ") exceed the arena of ", program().arena_bytes());
      }
      return absl::OkStatus();
    }
    case kvx::BufferKind::Weight: {
      if (ref->index() >= weight_bytes_.size()) {
        return invalid("weight ", ref->index(), " of ", weight_bytes_.size());
      }
      if (ref->row_stride() != 0) return invalid("a weight reference has a row stride");
      const kvx::Weight* weight = root_->weights()->Get(ref->index());
      if (weight->shape() == nullptr || weight->shape()->size() != ref->shape()->size()) {
        return invalid("weight '", weight->name()->str(), "' has another rank than its use");
      }
      for (size_t i = 0; i < ref->shape()->size(); ++i) {
        const kvx::Dim* dim = ref->shape()->Get(i);
        if (dim->kind() != kvx::DimKind::Static || dim->size() != weight->shape()->Get(i)) {
          return invalid("weight '", weight->name()->str(), "' has another shape than its use");
        }
      }
      return absl::OkStatus();
    }
    case kvx::BufferKind::Input:
      if (ref->row_stride() != 0) return invalid("a step input reference has a row stride");
      if (ref->index() > static_cast<uint32_t>(kvx::StepInput::MAX)) {
        return invalid("unknown step input ", ref->index());
      }
      return absl::OkStatus();
  }
  return invalid("unknown buffer kind");
}

absl::Status Executable::VerifyInstruction(const kvx::Instruction& instruction,
                                           size_t index) const {
  auto invalid = [&](auto... parts) {
    return absl::InvalidArgumentError(absl::StrCat(
        path_, ": instruction ", index, " (", kvx::EnumNameOpCode(instruction.op()), "): ",
        parts...));
  };
  const OpDescription* op = FindOp(instruction.op());
  if (op == nullptr) return invalid("unknown opcode");
  const size_t inputs = instruction.inputs() ? instruction.inputs()->size() : 0;
  const size_t outputs = instruction.outputs() ? instruction.outputs()->size() : 0;
  if (inputs < op->min_inputs || inputs > op->max_inputs || outputs != op->outputs) {
    return invalid(inputs, " inputs and ", outputs, " outputs do not fit the opcode");
  }
  // The kernels read the parameters their opcode's entry names, unchecked.
  if (instruction.params_type() != op->params) {
    auto name = [](kvx::OpParams type) -> std::string {
      return type > kvx::OpParams::MAX ? absl::StrCat("of unknown type ", static_cast<int>(type))
                                       : kvx::EnumNameOpParams(type);
    };
    return invalid("carries parameters ", name(instruction.params_type()),
                   " where the opcode takes ", name(op->params));
  }
  if (op->params != kvx::OpParams::NONE && instruction.params() == nullptr) {
    return invalid("its ", kvx::EnumNameOpParams(op->params), " are missing");
  }
  for (const kvx::TensorRef* ref : *instruction.inputs()) {
    KVJIT_RETURN_IF_ERROR(VerifyTensorRef(ref, index, "input"));
    if (ref->shape()->size() == 0) return invalid("an input has rank 0");
    if (ref->row_stride() != 0 && !op->reads_views) {
      return invalid("an input is a column view (row_stride ", ref->row_stride(),
                     "), which this opcode's kernels do not read in place");
    }
  }
  for (size_t i = 0; i < outputs; ++i) {
    const kvx::TensorRef* ref = instruction.outputs()->Get(i);
    KVJIT_RETURN_IF_ERROR(VerifyTensorRef(ref, index, "output"));
    if (ref->kind() != kvx::BufferKind::Arena) return invalid("an output is not in the arena");
    if (ref->row_stride() != 0) return invalid("an output is a column view; outputs are dense");
  }
  if (absl::Status status = op->verify(OpCheckContext{*root_, instruction}); !status.ok()) {
    return invalid(status.message());
  }
  return absl::OkStatus();
}

absl::Status Executable::VerifyProgram() const {
  const auto& instructions = *program().instructions();
  for (size_t i = 0; i < instructions.size(); ++i) {
    KVJIT_RETURN_IF_ERROR(VerifyInstruction(*instructions[i], i));
  }
  const kvx::TensorRef* logits = program().logits();
  KVJIT_RETURN_IF_ERROR(VerifyTensorRef(logits, instructions.size(), "logits"));
  const auto& shape = *logits->shape();
  if (logits->kind() != kvx::BufferKind::Arena || shape.size() != 2 || logits->row_stride() != 0 ||
      shape.Get(0)->kind() != kvx::DimKind::LogitsRows ||
      shape.Get(1)->kind() != kvx::DimKind::Static ||
      shape.Get(1)->size() != config().vocab_size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path_, ": the program's logits are not [logits rows, vocab] in the arena"));
  }
  return absl::OkStatus();
}

int64_t Executable::AttentionWindow() const {
  int64_t widest = 0;
  for (const kvx::Instruction* instruction : *program().instructions()) {
    if (instruction->op() != kvx::OpCode::KvAttention) continue;
    const int64_t window = instruction->params_as_KvAttentionParams()->window();
    if (window == 0) return 0;
    widest = std::max<int64_t>(widest, window);
  }
  return widest;
}

}  // namespace kvjit::runtime
