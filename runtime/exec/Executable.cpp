#include "runtime/exec/Executable.h"

#include <cmath>
#include <cstring>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "runtime/core/StatusMacros.h"
#include "runtime/schema/CudaLaunchAbi.h"
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

// The extent of a per-step size at its largest: T, L and S are bounded by
// the program's tokens per step; block-table columns only by the runtime's
// pool, so limits on them cannot be checked here (0 leaves them out).
int64_t LargestExtent(kvx::DimKind kind, int64_t static_size, int64_t max_tokens) {
  switch (kind) {
    case kvx::DimKind::Static:
      return static_size;
    case kvx::DimKind::SequencesPlusOne:
      return max_tokens + 1;
    case kvx::DimKind::MaxBlocks:
      return 0;
    default:
      return max_tokens;
  }
}

// Checks a list of size factors: divisors of at least 1, static sizes not
// negative, and a product at the largest step within `limit` (where limit
// is positive). `what` names the list in messages.
absl::Status VerifySizeFactors(const flatbuffers::Vector<const kvx::SizeFactor*>* factors,
                               int64_t max_tokens, int64_t limit, const std::string& what) {
  if (factors == nullptr) return absl::OkStatus();
  double largest = 1.0;
  for (const kvx::SizeFactor* factor : *factors) {
    if (factor->divisor() == 0)
      return absl::InvalidArgumentError(absl::StrCat(what, " divides by 0"));
    if (factor->kind() > kvx::DimKind::MAX) {
      return absl::InvalidArgumentError(absl::StrCat(what, " has an unknown dimension kind"));
    }
    if (factor->kind() == kvx::DimKind::Static && factor->size() < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " has a negative size ", factor->size()));
    }
    const double extent =
        static_cast<double>(LargestExtent(factor->kind(), factor->size(), max_tokens));
    largest *= std::ceil(extent / factor->divisor());
  }
  if (limit > 0 && largest > static_cast<double>(limit)) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " reaches ", largest, " at the largest step, over the limit of ", limit));
  }
  return absl::OkStatus();
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
  KVJIT_RETURN_IF_ERROR(executable->Verify());
  KVJIT_RETURN_IF_ERROR(executable->MapWeights(options.verify_weight_checksums));
  KVJIT_RETURN_IF_ERROR(executable->VerifyProgram());
  KVJIT_RETURN_IF_ERROR(executable->VerifyCudaModule());
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

absl::Status Executable::MapWeights(bool verify_checksums) {
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
    if (verify_checksums && Fnv1a64(bytes) != weight->checksum()) {
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
  const Arity arity = ArityOf(instruction.op());
  const size_t inputs = instruction.inputs() ? instruction.inputs()->size() : 0;
  const size_t outputs = instruction.outputs() ? instruction.outputs()->size() : 0;
  if (arity.max_inputs == 0) return invalid("unknown opcode");
  if (inputs < arity.min_inputs || inputs > arity.max_inputs || outputs != arity.outputs) {
    return invalid(inputs, " inputs and ", outputs, " outputs do not fit the opcode");
  }
  // The kernels that read a column view of wider rows in place.
  const bool reads_views = instruction.op() == kvx::OpCode::Copy ||
                           instruction.op() == kvx::OpCode::SwiGlu ||
                           instruction.op() == kvx::OpCode::Elementwise;
  for (const kvx::TensorRef* ref : *instruction.inputs()) {
    KVJIT_RETURN_IF_ERROR(VerifyTensorRef(ref, index, "input"));
    if (ref->shape()->size() == 0) return invalid("an input has rank 0");
    if (ref->row_stride() != 0 && !reads_views) {
      return invalid("an input is a column view (row_stride ", ref->row_stride(),
                     "), which only Copy, SwiGlu and Elementwise read");
    }
  }
  for (size_t i = 0; i < outputs; ++i) {
    const kvx::TensorRef* ref = instruction.outputs()->Get(i);
    KVJIT_RETURN_IF_ERROR(VerifyTensorRef(ref, index, "output"));
    if (ref->kind() != kvx::BufferKind::Arena) return invalid("an output is not in the arena");
    if (ref->row_stride() != 0) return invalid("an output is a column view; outputs are dense");
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
  if (logits->kind() != kvx::BufferKind::Arena || shape.size() != 2 || logits->row_stride() != 0 ||
      shape.Get(0)->kind() != kvx::DimKind::LogitsRows ||
      shape.Get(1)->kind() != kvx::DimKind::Static ||
      shape.Get(1)->size() != config().vocab_size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path_, ": the program's logits are not [logits rows, vocab] in the arena"));
  }
  return absl::OkStatus();
}

absl::Status Executable::VerifyCudaPath(const kvx::CudaPath* path,
                                        const kvx::Instruction& instruction, size_t index,
                                        const char* name) const {
  const std::string where =
      absl::StrCat(path_, ": cuda instruction ", index, " (", kvx::EnumNameOpCode(instruction.op()),
                   ") ", name, " path");
  if (path == nullptr) return absl::InvalidArgumentError(absl::StrCat(where, " is missing"));
  const int64_t max_tokens = program().max_tokens();
  const uint32_t kernels = cuda()->kernels()->size();
  auto verify_launches = [&](const auto* launches, const char* role) -> absl::Status {
    if (launches == nullptr) return absl::OkStatus();
    for (size_t j = 0; j < launches->size(); ++j) {
      const kvx::CudaLaunch& launch = *launches->Get(j);
      const std::string what = absl::StrCat(where, ", ", role, " ", j);
      if (launch.kernel() >= kernels) {
        return absl::InvalidArgumentError(
            absl::StrCat(what, ": kernel ", launch.kernel(), " of ", kernels));
      }
      if (launch.block_threads() == 0 || launch.block_threads() > 1024) {
        return absl::InvalidArgumentError(
            absl::StrCat(what, ": ", launch.block_threads(), " threads per block, not 1 to 1024"));
      }
      KVJIT_RETURN_IF_ERROR(VerifySizeFactors(launch.grid_x(), max_tokens, (int64_t{1} << 31) - 1,
                                              absl::StrCat(what, ": grid x")));
      KVJIT_RETURN_IF_ERROR(
          VerifySizeFactors(launch.grid_y(), max_tokens, 65535, absl::StrCat(what, ": grid y")));
      KVJIT_RETURN_IF_ERROR(
          VerifySizeFactors(launch.grid_z(), max_tokens, 65535, absl::StrCat(what, ": grid z")));
    }
    return absl::OkStatus();
  };
  KVJIT_RETURN_IF_ERROR(verify_launches(path->launches(), "launch"));
  KVJIT_RETURN_IF_ERROR(verify_launches(path->epilogue(), "epilogue launch"));
  KVJIT_RETURN_IF_ERROR(
      VerifySizeFactors(path->scratch_bytes(), max_tokens, 0, absl::StrCat(where, ": scratch")));
  if (const kvx::CudaGemm* gemm = path->gemm()) {
    if (instruction.op() != kvx::OpCode::Linear) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": only a Linear has a GEMM"));
    }
    const kvx::TensorRef& weight = *instruction.inputs()->Get(1);
    const auto* shape = root_->weights()->Get(weight.index())->shape();
    if (gemm->m() == nullptr || gemm->m()->size() == 0 || gemm->n() != shape->Get(0) ||
        gemm->k() != shape->Get(1)) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": the GEMM is not [m, k] x [n, k] over the weight's [",
                       shape->Get(0), ", ", shape->Get(1), "]"));
    }
    KVJIT_RETURN_IF_ERROR(
        VerifySizeFactors(gemm->m(), max_tokens, 0, absl::StrCat(where, ": GEMM rows")));
    if (gemm->weight_offset() % cuda_abi::kScratchAlignment != 0 ||
        gemm->activation_offset() % cuda_abi::kScratchAlignment != 0) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": GEMM operands are not ",
                                                     cuda_abi::kScratchAlignment, "-byte aligned"));
    }
    // The f16 weight lies in the fixed part of the scratch, the activation
    // (which grows with the step) after it.
    const uint64_t weight_bytes = uint64_t{gemm->n()} * gemm->k() * 2;
    if (gemm->activation_offset() < gemm->weight_offset() + weight_bytes ||
        path->scratch_fixed_bytes() < gemm->activation_offset() ||
        path->scratch_bytes() == nullptr || path->scratch_bytes()->size() == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": the GEMM's f16 weight and activation do not fit its scratch, in that order"));
    }
  } else if (path->epilogue() != nullptr && path->epilogue()->size() > 0) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": an epilogue without a GEMM"));
  }
  return absl::OkStatus();
}

absl::Status Executable::VerifyCudaModule() const {
  const kvx::CudaModule* module = cuda();
  if (module == nullptr) return absl::OkStatus();
  auto invalid = [&](auto... parts) {
    return absl::InvalidArgumentError(absl::StrCat(path_, ": cuda module: ", parts...));
  };
  if (module->abi_version() != cuda_abi::kKernelAbiVersion) {
    return invalid("kernel ABI version ", module->abi_version(), " is not this runtime's ",
                   cuda_abi::kKernelAbiVersion, "; recompile the model with this kvjit");
  }
  if (module->arch() < 50) return invalid("architecture sm_", module->arch(), " is not one");
  const bool has_cubin = module->cubin() != nullptr && module->cubin()->size() > 0;
  if (!has_cubin && (module->ptx() == nullptr || module->ptx()->size() == 0)) {
    return invalid("has neither a cubin nor PTX");
  }
  if (has_cubin && (module->cubin()->size() < 4 ||
                    std::memcmp(module->cubin()->data(), "\x7f" "ELF", 4) != 0)) {
    return invalid("the cubin is not an ELF image");
  }
  if (module->kernels() == nullptr || module->kernels()->size() == 0) {
    return invalid("has no kernels");
  }
  std::set<std::string> names;
  for (const kvx::CudaKernel* kernel : *module->kernels()) {
    if (kernel->name()->size() == 0 || !names.insert(kernel->name()->str()).second) {
      return invalid("kernel name '", kernel->name()->str(), "' is empty or repeated");
    }
  }
  const auto& instructions = *program().instructions();
  if (module->instructions() == nullptr || module->instructions()->size() != instructions.size()) {
    return invalid(module->instructions() ? module->instructions()->size() : 0,
                   " instructions for a program of ", instructions.size());
  }
  if (module->prefill_min_rows() == 0) return invalid("prefill_min_rows is zero");
  for (size_t i = 0; i < instructions.size(); ++i) {
    const kvx::Instruction& instruction = *instructions[i];
    const int buffers = static_cast<int>(
        instruction.inputs()->size() + (instruction.outputs() ? instruction.outputs()->size() : 0));
    if (cuda_abi::ScratchBuffer(buffers, 0) >= cuda_abi::kMaxLaunchBuffers) {
      return invalid("instruction ", i, " has ", buffers, " buffers; kernels take at most ",
                     cuda_abi::kMaxLaunchBuffers - 2);
    }
    const kvx::CudaInstruction& launch = *module->instructions()->Get(i);
    KVJIT_RETURN_IF_ERROR(
        VerifySizeFactors(launch.rows(), program().max_tokens(), 0,
                          absl::StrCat(path_, ": cuda instruction ", i, " rows")));
    KVJIT_RETURN_IF_ERROR(VerifyCudaPath(launch.decode(), instruction, i, "decode"));
    KVJIT_RETURN_IF_ERROR(VerifyCudaPath(launch.prefill(), instruction, i, "prefill"));
  }
  return absl::OkStatus();
}

}  // namespace kvjit::runtime
