#include "runtime/exec/Executable.h"

#include "absl/strings/str_cat.h"
#include "runtime/core/StatusMacros.h"
#include "runtime/exec/KvxTypes.h"
#include "runtime/schema/SchemaVersion.h"

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

// Inputs and outputs each opcode reads and writes (KvWrite writes the cache,
// no tensor).
struct Arity {
  size_t min_inputs, max_inputs, outputs;
};

Arity ArityOf(kvx::OpCode op) {
  switch (op) {
    case kvx::OpCode::Embedding: return {2, 2, 1};
    case kvx::OpCode::Linear: return {2, 3, 1};
    case kvx::OpCode::RmsNorm: return {2, 2, 1};
    case kvx::OpCode::AddRmsNorm: return {3, 3, 2};
    case kvx::OpCode::SwiGlu: return {2, 2, 1};
    case kvx::OpCode::Rope: return {2, 2, 1};
    case kvx::OpCode::Elementwise: return {1, 64, 1};
    case kvx::OpCode::KvWrite: return {3, 3, 0};
    case kvx::OpCode::KvAttention: return {5, 5, 1};
    case kvx::OpCode::GatherRows: return {2, 2, 1};
    case kvx::OpCode::Copy: return {1, 1, 1};
  }
  return {0, 0, 0};
}

bool SameDim(const kvx::Dim& a, const kvx::Dim& b) {
  return a.kind() == b.kind() && (a.kind() != kvx::DimKind::Static || a.size() == b.size());
}

bool SameShape(const kvx::TensorRef& a, const kvx::TensorRef& b) {
  if (a.shape()->size() != b.shape()->size()) return false;
  for (size_t i = 0; i < a.shape()->size(); ++i) {
    if (!SameDim(*a.shape()->Get(i), *b.shape()->Get(i))) return false;
  }
  return true;
}

// A reshape keeps the element count for every size of the step: the same
// per-step dimensions, in order, and the same product of static ones.
bool SameElementCount(const kvx::TensorRef& a, const kvx::TensorRef& b) {
  auto summarize = [](const kvx::TensorRef& ref) {
    std::pair<std::vector<kvx::DimKind>, int64_t> summary{{}, 1};
    for (const kvx::Dim* dim : *ref.shape()) {
      if (dim->kind() == kvx::DimKind::Static) {
        summary.second *= dim->size();
      } else {
        summary.first.push_back(dim->kind());
      }
    }
    return summary;
  };
  return summarize(a) == summarize(b);
}

// The static size of a reference's last dimension, or -1.
int64_t LastStaticDim(const kvx::TensorRef& ref) {
  const kvx::Dim* last = ref.shape()->Get(ref.shape()->size() - 1);
  return last->kind() == kvx::DimKind::Static ? last->size() : -1;
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
  // The runtime's kernels address the pool with these strides; a layout they
  // do not describe must not load.
  const uint64_t element = kv.element_type() == kvx::StorageType::F32 ? 4 : 2;
  const uint64_t slot_stride = uint64_t{kv.num_kv_heads()} * kv.head_dim() * element;
  const uint64_t value_offset = slot_stride * kv.block_size();
  if (kv.slot_stride_bytes() != slot_stride || kv.value_offset_bytes() != value_offset ||
      kv.layer_stride_bytes() != 2 * value_offset ||
      kv.bytes_per_block() != 2 * value_offset * kv.num_layers()) {
    return invalid("kv_layout's strides are not the [layer][K, V][slot][head][dim] layout this "
                   "runtime reads");
  }
  if (root_->config()->vocab_size() == 0) return invalid("field 'config.vocab_size' is zero");
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
    absl::Span<const uint8_t> bytes = file.subspan(weight->offset(), weight->size_bytes());
    if (Fnv1a64(bytes) != weight->checksum()) {
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
  const Arity arity = ArityOf(instruction.op());
  const size_t inputs = instruction.inputs() ? instruction.inputs()->size() : 0;
  const size_t outputs = instruction.outputs() ? instruction.outputs()->size() : 0;
  if (arity.max_inputs == 0) return invalid("unknown opcode");
  if (inputs < arity.min_inputs || inputs > arity.max_inputs || outputs != arity.outputs) {
    return invalid(inputs, " inputs and ", outputs, " outputs do not fit the opcode");
  }
  for (const kvx::TensorRef* ref : *instruction.inputs()) {
    KVJIT_RETURN_IF_ERROR(VerifyTensorRef(ref, index, "input"));
    if (ref->shape()->size() == 0) return invalid("an input has rank 0");
  }
  for (size_t i = 0; i < outputs; ++i) {
    const kvx::TensorRef* ref = instruction.outputs()->Get(i);
    KVJIT_RETURN_IF_ERROR(VerifyTensorRef(ref, index, "output"));
    if (ref->kind() != kvx::BufferKind::Arena) return invalid("an output is not in the arena");
  }
  const kvx::TensorRef& first = *instruction.inputs()->Get(0);
  const auto& in = *instruction.inputs();
  auto weight_dim = [&](const kvx::TensorRef& ref, size_t dim) -> int64_t {
    const auto* shape = root_->weights()->Get(ref.index())->shape();
    return dim < shape->size() ? shape->Get(dim) : -1;
  };
  // What the kernels write is sized by these; each must agree with the
  // output references the arena was checked against.
  if (outputs > 0) {
    const kvx::TensorRef& out = *instruction.outputs()->Get(0);
    bool fits = true;
    switch (instruction.op()) {
      case kvx::OpCode::Embedding:
        fits = in[0]->kind() == kvx::BufferKind::Weight && LastStaticDim(out) == weight_dim(*in[0], 1);
        break;
      case kvx::OpCode::Linear:
        fits = in[1]->kind() == kvx::BufferKind::Weight && weight_dim(*in[1], 1) > 0 &&
               LastStaticDim(first) == weight_dim(*in[1], 1) &&
               LastStaticDim(out) == weight_dim(*in[1], 0) &&
               out.shape()->size() == first.shape()->size() &&
               SameDim(*out.shape()->Get(0), *first.shape()->Get(0)) &&
               (in.size() < 3 || LastStaticDim(*in[2]) == weight_dim(*in[1], 0));
        break;
      case kvx::OpCode::RmsNorm:
      case kvx::OpCode::AddRmsNorm: {
        const kvx::TensorRef& weight = *in[in.size() - 1];
        fits = SameShape(out, first) && LastStaticDim(weight) == LastStaticDim(first) &&
               (outputs < 2 || SameShape(*instruction.outputs()->Get(1), first)) &&
               (in.size() < 3 || SameShape(*in[1], first));
        break;
      }
      case kvx::OpCode::SwiGlu:
        fits = SameShape(out, first) && SameShape(*in[1], first);
        break;
      case kvx::OpCode::Rope:
      case kvx::OpCode::KvAttention:
        fits = SameShape(out, first);
        break;
      case kvx::OpCode::Copy:
        fits = SameElementCount(out, first);
        break;
      case kvx::OpCode::Elementwise:
        for (const kvx::TensorRef* ref : in) fits = fits && SameShape(*ref, out);
        break;
      case kvx::OpCode::GatherRows:
        fits = LastStaticDim(out) == LastStaticDim(first) && LastStaticDim(out) > 0;
        break;
      case kvx::OpCode::KvWrite:
        break;
    }
    if (!fits) return invalid("the output's shape does not fit the inputs'");
  }
  switch (instruction.op()) {
    case kvx::OpCode::Rope:
    case kvx::OpCode::KvAttention:
    case kvx::OpCode::KvWrite:
      if (first.shape()->size() != 3) return invalid("needs [tokens, heads, head_dim] operands");
      if (first.shape()->Get(2)->kind() != kvx::DimKind::Static ||
          (instruction.op() != kvx::OpCode::Rope &&
           first.shape()->Get(2)->size() != kv_layout().head_dim())) {
        return invalid("head_dim differs from the KV layout's");
      }
      break;
    case kvx::OpCode::Elementwise: {
      const auto* steps = instruction.elementwise();
      if (steps == nullptr || steps->size() == 0) return invalid("has no elementwise steps");
      for (size_t k = 0; k < steps->size(); ++k) {
        for (int operand : {steps->Get(k)->lhs(), steps->Get(k)->rhs()}) {
          if (operand >= static_cast<int>(inputs) || -operand - 1 >= static_cast<int>(k)) {
            return invalid("step ", k, " names operand ", operand, ", which does not exist yet");
          }
        }
      }
      break;
    }
    default:
      break;
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
  if (logits->kind() != kvx::BufferKind::Arena || shape.size() != 2 ||
      shape.Get(0)->kind() != kvx::DimKind::LogitsRows ||
      shape.Get(1)->kind() != kvx::DimKind::Static ||
      shape.Get(1)->size() != config().vocab_size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path_, ": the program's logits are not [logits rows, vocab] in the arena"));
  }
  return absl::OkStatus();
}

}  // namespace kvjit::runtime
