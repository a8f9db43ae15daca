#include "runtime/exec/Executable.h"

#include "absl/strings/str_cat.h"
#include "runtime/core/StatusMacros.h"
#include "runtime/schema/SchemaVersion.h"

namespace kvjit::runtime {
namespace {

// Elements of a dimension at its largest (the static size, or the program's
// token bound for per-step sizes).
uint64_t MaxExtent(const kvx::Dim& dim, uint64_t max_tokens) {
  switch (dim.kind()) {
    case kvx::DimKind::Static:
      return static_cast<uint64_t>(dim.size());
    case kvx::DimKind::SequencesPlusOne:
      return max_tokens + 1;
    default:
      return max_tokens;
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<Executable>> Executable::Load(const std::string& path) {
  std::unique_ptr<Executable> executable(new Executable(path));
  KVJIT_ASSIGN_OR_RETURN(MappedFile file, MappedFile::Open(path));
  executable->file_ = std::make_unique<MappedFile>(std::move(file));
  KVJIT_RETURN_IF_ERROR(executable->Verify());
  KVJIT_RETURN_IF_ERROR(executable->MapWeights());
  KVJIT_RETURN_IF_ERROR(executable->VerifyProgram());
  return executable;
}

absl::Status Executable::Verify() {
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
  return absl::OkStatus();
}

absl::Status Executable::MapWeights() {
  for (const kvx::WeightFile* weight_file : *root_->weight_files()) {
    absl::StatusOr<MappedFile> mapped = MappedFile::Open(weight_file->path()->str());
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
    weight_bytes_.push_back(file.subspan(weight->offset(), weight->size_bytes()));
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
  const uint64_t max_tokens = program().max_tokens();
  switch (ref->kind()) {
    case kvx::BufferKind::Arena: {
      uint64_t bytes = sizeof(float);
      for (const kvx::Dim* dim : *ref->shape()) bytes *= MaxExtent(*dim, max_tokens);
      if (ref->offset() > program().arena_bytes() ||
          bytes > program().arena_bytes() - ref->offset()) {
        return invalid("arena bytes [", ref->offset(), ", ", ref->offset() + bytes,
                       ") exceed the arena of ", program().arena_bytes());
      }
      return absl::OkStatus();
    }
    case kvx::BufferKind::Weight:
      if (ref->index() >= weight_bytes_.size()) {
        return invalid("weight ", ref->index(), " of ", weight_bytes_.size());
      }
      return absl::OkStatus();
    case kvx::BufferKind::Input:
      if (ref->index() > static_cast<uint32_t>(kvx::StepInput::MAX)) {
        return invalid("unknown step input ", ref->index());
      }
      return absl::OkStatus();
  }
  return invalid("unknown buffer kind");
}

absl::Status Executable::VerifyProgram() const {
  const auto& instructions = *program().instructions();
  for (size_t i = 0; i < instructions.size(); ++i) {
    const kvx::Instruction* instruction = instructions[i];
    if (instruction->inputs() == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(path_, ": instruction ", i, " has no inputs"));
    }
    for (const kvx::TensorRef* ref : *instruction->inputs()) {
      KVJIT_RETURN_IF_ERROR(VerifyTensorRef(ref, i, "input"));
    }
    if (instruction->outputs() != nullptr) {
      for (const kvx::TensorRef* ref : *instruction->outputs()) {
        KVJIT_RETURN_IF_ERROR(VerifyTensorRef(ref, i, "output"));
      }
    }
  }
  return VerifyTensorRef(program().logits(), instructions.size(), "logits");
}

}  // namespace kvjit::runtime
