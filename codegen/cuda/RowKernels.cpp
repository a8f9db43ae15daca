// Row-by-row and element-wise kernels of the opcodes that are not row-wise
// ops: Embedding, Elementwise chains, GatherRows, Copy.

#include <iterator>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "codegen/cuda/KernelEmitter.h"
#include "runtime/core/StatusMacros.h"
#include "runtime/schema/CudaLaunchAbi.h"
#include "runtime/schema/EnumTable.h"
#include "runtime/schema/OpOperands.h"

namespace kvjit::codegen::cuda {
namespace {

constexpr uint32_t kElementThreads = 256;

// The CUDA expression of one element of each elementwise step
// (runtime/exec/ElementwiseOpTable.h describes the steps), over `{lhs}`,
// `{rhs}` and `{factor}`; the device prelude (DevicePrelude.cpp) defines the
// functions it calls beyond CUDA's own.
struct ElementwiseExpression {
  kvx::ElementwiseOpCode op;
  const char* cuda;
};

constexpr ElementwiseExpression kElementwiseExpressions[] = {
    {kvx::ElementwiseOpCode::Add, "{lhs} + {rhs}"},
    {kvx::ElementwiseOpCode::Mul, "{lhs} * {rhs}"},
    {kvx::ElementwiseOpCode::Scale, "{lhs} * {factor}"},
    {kvx::ElementwiseOpCode::Silu, "silu({lhs})"},
    {kvx::ElementwiseOpCode::Gelu, "gelu_erf({lhs})"},
    {kvx::ElementwiseOpCode::GeluTanh, "gelu_tanh({lhs})"},
    {kvx::ElementwiseOpCode::Tanh, "tanhf({lhs})"},
};

static_assert(kvx::CoversEnumInOrder(kElementwiseExpressions),
              "kElementwiseExpressions has one CUDA expression per kvx::ElementwiseOpCode, in "
              "the enum's order: a new elementwise opcode needs its expression here");

const kvx::TensorRef& Output(const EmitContext& context, int i) {
  return *context.instruction.outputs()->Get(i);
}
size_t Rank(const kvx::TensorRef& ref) { return ref.shape()->size(); }

constexpr char kEmbedding[] = R"cuda(
// Embedding: rows of a [@VOCAB@, @COLS@] @STORAGE@ table.
extern "C" __global__ void __launch_bounds__(@THREADS@)
KVJIT_KERNEL(const kvjit::cuda_abi::LaunchArgs args) {
  constexpr int kCols = @COLS@;
  constexpr int kGroups = (kCols + 31) / 32;
  const int64_t row = blockIdx.x;
  const int32_t id = static_cast<const int32_t*>(args.buffers[@TOKENS@])[row];
  float* out = static_cast<float*>(args.buffers[@OUT@]) + row * kCols;
  if (id < 0 || id >= @VOCAB@) {
    for (int i = threadIdx.x; i < kCols; i += blockDim.x) out[i] = quiet_nan();
    return;
  }
  const uint8_t* table_row =
      static_cast<const uint8_t*>(args.buffers[@TABLE@]) + static_cast<uint64_t>(id) * @ROW_BYTES@ull;
  for (int group = threadIdx.x; group < kGroups; group += blockDim.x) {
    float values[32];
    @DEQUANT@(table_row, group, kCols, values);
    for (int j = 0; j < 32 && group * 32 + j < kCols; ++j) out[group * 32 + j] = values[j];
  }
}
)cuda";

constexpr char kElementwise[] = R"cuda(
// @COMMENT@
extern "C" __global__ void __launch_bounds__(@THREADS@)
KVJIT_KERNEL(const kvjit::cuda_abi::LaunchArgs args) {
  const int64_t count = @COUNT@;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= count) return;
@BODY@}
)cuda";

constexpr char kGatherRows[] = R"cuda(
// GatherRows of width @WIDTH@.
extern "C" __global__ void __launch_bounds__(@THREADS@)
KVJIT_KERNEL(const kvjit::cuda_abi::LaunchArgs args) {
  constexpr int kWidth = @WIDTH@;
  const int64_t source_rows = @SOURCE_ROWS@;
  const int64_t row = blockIdx.x;
  const int32_t source = static_cast<const int32_t*>(args.buffers[@ROWS@])[row];
  float* out = static_cast<float*>(args.buffers[@OUT@]) + row * kWidth;
  const float* x =
      static_cast<const float*>(args.buffers[@X@]) + static_cast<int64_t>(source) * kWidth;
  const bool inside = source >= 0 && source < source_rows;
  for (int i = threadIdx.x; i < kWidth; i += blockDim.x) out[i] = inside ? x[i] : quiet_nan();
}
)cuda";

// The rows a row-wise instruction walks (all but the last dimension of its
// first input) and that dimension's static width.
struct Rows {
  SizeExpr grid;
  int64_t width;
};

absl::StatusOr<Rows> RowsOf(const kvx::TensorRef& ref) {
  KVJIT_ASSIGN_OR_RETURN(int64_t width, StaticDim(ref, Rank(ref) - 1, "the row width"));
  return Rows{ExtentFactors(ref, 0, Rank(ref) - 1), width};
}

// Bytes an arena reference spans at the program's largest step.
uint64_t LargestArenaBytes(const kvx::TensorRef& ref, int64_t max_tokens) {
  uint64_t bytes = sizeof(float);
  for (const kvx::Dim* dim : *ref.shape()) {
    const int64_t extent = dim->kind() == kvx::DimKind::Static             ? dim->size()
                           : dim->kind() == kvx::DimKind::SequencesPlusOne ? max_tokens + 1
                                                                           : max_tokens;
    bytes *= static_cast<uint64_t>(extent);
  }
  return bytes;
}

}  // namespace

absl::StatusOr<InstructionSpec> ElementKernel(const EmitContext& context, absl::string_view stem,
                                              const std::string& comment, const std::string& body) {
  const kvx::TensorRef& out = Output(context, 0);
  const uint32_t kernel =
      context.kernels.Add(stem, Fill(kElementwise, {{"COMMENT", comment},
                                                    {"THREADS", absl::StrCat(kElementThreads)},
                                                    {"COUNT", ExtentExpr(out, 0, Rank(out))},
                                                    {"BODY", body}}));
  PathSpec path;
  path.launches.push_back(Launch(kernel, kElementThreads,
                                 DivideFirst(ExtentFactors(out, 0, Rank(out)), kElementThreads)));
  return SamePaths(StepTokens(), path);
}

absl::StatusOr<InstructionSpec> EmitEmbedding(const EmitContext& context) {
  using Operand = kvx::EmbeddingOperand;
  KVJIT_ASSIGN_OR_RETURN(const kvx::Weight* table,
                         WeightOf(context, kvx::OperandIndex(Operand::Table)));
  if (table->shape()->size() != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("embedding table '", table->name()->str(), "' is not a matrix"));
  }
  const int64_t vocab = table->shape()->Get(0), cols = table->shape()->Get(1);
  KVJIT_ASSIGN_OR_RETURN(std::string dequant, DequantFunction(table->storage()));
  KVJIT_ASSIGN_OR_RETURN(uint64_t row_bytes, WeightRowBytes(table->storage(), cols));
  const uint32_t threads = RowThreads((cols + 31) / 32);
  const uint32_t kernel = context.kernels.Add(
      "embedding", Fill(kEmbedding, {{"THREADS", absl::StrCat(threads)},
                                     {"VOCAB", absl::StrCat(vocab)},
                                     {"COLS", absl::StrCat(cols)},
                                     {"STORAGE", kvx::EnumNameStorageType(table->storage())},
                                     {"ROW_BYTES", absl::StrCat(row_bytes)},
                                     {"DEQUANT", dequant},
                                     {"TABLE", absl::StrCat(kvx::OperandIndex(Operand::Table))},
                                     {"TOKENS", absl::StrCat(kvx::OperandIndex(Operand::Tokens))},
                                     {"OUT", absl::StrCat(OutputBuffer(context.instruction, 0))}}));
  const kvx::TensorRef& out = Output(context, 0);
  PathSpec path;
  path.launches.push_back(Launch(kernel, threads, ExtentFactors(out, 0, Rank(out) - 1)));
  return SamePaths(StepTokens(), path);
}

absl::StatusOr<InstructionSpec> EmitElementwise(const EmitContext& context) {
  const kvx::ElementwiseParams* chain = context.instruction.params_as_ElementwiseParams();
  if (chain == nullptr) return absl::InvalidArgumentError("a chain without its ElementwiseParams");
  const auto& steps = *chain->steps();
  const int inputs = static_cast<int>(context.instruction.inputs()->size());
  if (inputs > cuda_abi::kMaxInstructionInputs) {
    return absl::UnimplementedError(absl::StrCat("an elementwise chain of ", inputs,
                                                 " inputs; CUDA kernels take at most ",
                                                 cuda_abi::kMaxInstructionInputs));
  }
  std::string body;
  for (int k = 0; k < inputs; ++k) {
    KVJIT_ASSIGN_OR_RETURN(std::string load, ElementLoad(context, k, "i"));
    absl::StrAppend(&body, "  const float in", k, " = ", load, ";\n");
  }
  auto operand = [](int index) {
    return index >= 0 ? absl::StrCat("in", index) : absl::StrCat("step", -index - 1);
  };
  std::string comment = "Elementwise:";
  for (size_t k = 0; k < steps.size(); ++k) {
    const kvx::ElementwiseStep& step = *steps.Get(k);
    const std::string lhs = operand(step.lhs()), rhs = operand(step.rhs());
    const size_t index = static_cast<size_t>(step.op());
    if (index >= std::size(kElementwiseExpressions)) {
      return absl::InvalidArgumentError(absl::StrCat("step ", k, " has elementwise opcode ",
                                                     static_cast<int>(step.op()),
                                                     ", which no CUDA expression describes"));
    }
    const std::string value = absl::StrReplaceAll(
        kElementwiseExpressions[index].cuda,
        {{"{lhs}", lhs}, {"{rhs}", rhs}, {"{factor}", FloatLiteral(step.factor())}});
    absl::StrAppend(&comment, " ", kvx::EnumNameElementwiseOpCode(step.op()));
    absl::StrAppend(&body, "  const float step", k, " = ", value, ";\n");
  }
  absl::StrAppend(&body, "  ", Buffer(OutputBuffer(context.instruction, 0), "float"), "[i] = step",
                  steps.size() - 1, ";\n");
  return ElementKernel(context, "elementwise", comment, body);
}

absl::StatusOr<InstructionSpec> EmitGatherRows(const EmitContext& context) {
  using Operand = kvx::GatherRowsOperand;
  const kvx::TensorRef& x = kvx::InputOf(context.instruction, Operand::X);
  KVJIT_ASSIGN_OR_RETURN(Rows rows, RowsOf(x));
  const uint32_t threads = RowThreads(rows.width);
  const uint32_t kernel = context.kernels.Add(
      "gather_rows",
      Fill(kGatherRows, {{"THREADS", absl::StrCat(threads)},
                         {"WIDTH", absl::StrCat(rows.width)},
                         {"SOURCE_ROWS", ExtentExpr(x, 0, Rank(x) - 1)},
                         {"X", absl::StrCat(kvx::OperandIndex(Operand::X))},
                         {"ROWS", absl::StrCat(kvx::OperandIndex(Operand::Rows))},
                         {"OUT", absl::StrCat(OutputBuffer(context.instruction, 0))}}));
  const kvx::TensorRef& out = Output(context, 0);
  PathSpec path;
  path.launches.push_back(Launch(kernel, threads, ExtentFactors(out, 0, Rank(out) - 1)));
  return SamePaths(StepTokens(), path);
}

absl::StatusOr<InstructionSpec> EmitCopy(const EmitContext& context) {
  const kvx::TensorRef& in = kvx::InputOf(context.instruction, kvx::CopyOperand::X);
  const kvx::TensorRef& out = Output(context, 0);
  if (in.kind() == kvx::BufferKind::Arena) {
    // A reshape in place (plan-memory gives it its operand's bytes) is no work.
    if (in.offset() == out.offset()) return SamePaths(StepTokens(), PathSpec{});
    const int64_t max_tokens = context.executable.program()->max_tokens();
    const uint64_t in_end = in.offset() + LargestArenaBytes(in, max_tokens);
    const uint64_t out_end = out.offset() + LargestArenaBytes(out, max_tokens);
    if (in.offset() < out_end && out.offset() < in_end) {
      return absl::UnimplementedError(
          "a Copy between overlapping arena ranges at different offsets");
    }
  }
  KVJIT_ASSIGN_OR_RETURN(std::string load,
                         ElementLoad(context, kvx::OperandIndex(kvx::CopyOperand::X), "i"));
  return ElementKernel(context, "copy", "Copy.",
                       absl::StrCat("  ", Buffer(OutputBuffer(context.instruction, 0), "float"),
                                    "[i] = ", load, ";\n"));
}

}  // namespace kvjit::codegen::cuda
