#include "codegen/cuda/CudaCodegen.h"

#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "codegen/cuda/KernelEmitter.h"
#include "codegen/cuda/KernelTable.h"
#include "runtime/core/StatusMacros.h"
#include "runtime/ops/RowOps.h"
#include "runtime/schema/CudaLaunchAbi.h"

namespace kvjit::codegen::cuda {
namespace {

using Emitter = absl::StatusOr<InstructionSpec> (*)(const EmitContext& context);

struct EmitterEntry {
  kvx::OpCode op;
  Emitter emit;
};

// The emitters of the opcodes that are not row-wise; runtime/ops holds the
// others'.
constexpr EmitterEntry kEmitters[] = {
    {kvx::OpCode::Embedding, EmitEmbedding},
    {kvx::OpCode::Linear, EmitLinear},
    {kvx::OpCode::Elementwise, EmitElementwise},
    {kvx::OpCode::KvWrite, EmitKvWrite},
    {kvx::OpCode::KvAttention, EmitKvAttention},
    {kvx::OpCode::GatherRows, EmitGatherRows},
    {kvx::OpCode::Copy, EmitCopy},
};

static_assert(runtime::DescribesEveryOpCodeOnce<kEmitters>());

// The generator as a row-wise op's emitter sees it: the op writes one
// kernel, placed here in the module with its launch on both paths.
class RowKernelEmitter : public runtime::CudaRowKernelEmitter {
 public:
  explicit RowKernelEmitter(const EmitContext& context) : context_(context) {}

  const kvx::Instruction& instruction() const override { return context_.instruction; }

  absl::StatusOr<std::string> ElementLoad(int input, absl::string_view index) const override {
    return cuda::ElementLoad(context_, input, index);
  }

  int OutputBuffer(int output) const override {
    return cuda::OutputBuffer(context_.instruction, output);
  }

  void AddRowKernel(absl::string_view stem, const std::string& text, uint32_t threads, int input,
                    size_t end) override {
    const uint32_t kernel = context_.kernels.Add(stem, text);
    PathSpec path;
    path.launches.push_back(
        Launch(kernel, threads, ExtentFactors(*context_.instruction.inputs()->Get(input), 0, end)));
    spec_ = SamePaths(StepTokens(), path);
  }

  void AddElementKernel(absl::string_view stem, const std::string& comment,
                        const std::string& body) override {
    spec_ = ElementKernel(context_, stem, comment, body);
  }

  // The instruction's kernel, once the op's emitter has added it.
  absl::StatusOr<InstructionSpec> spec() && {
    if (!spec_.has_value()) return absl::InternalError("the row-wise op added no kernel");
    return *std::move(spec_);
  }

 private:
  const EmitContext& context_;
  std::optional<absl::StatusOr<InstructionSpec>> spec_;
};

absl::StatusOr<InstructionSpec> Emit(const EmitContext& context) {
  if (const runtime::RowOp* row = runtime::FindRowOp(context.instruction.op())) {
    RowKernelEmitter emitter(context);
    KVJIT_RETURN_IF_ERROR(row->cuda(emitter));
    return std::move(emitter).spec();
  }
  for (const EmitterEntry& entry : kEmitters) {
    if (entry.op == context.instruction.op()) return entry.emit(context);
  }
  return absl::UnimplementedError("an opcode without a CUDA kernel");
}

}  // namespace

absl::StatusOr<CudaModuleSpec> GenerateCudaModule(const kvx::Executable& executable,
                                                  uint32_t prefill_min_rows) {
  if (executable.program() == nullptr || executable.program()->instructions() == nullptr ||
      executable.kv_layout() == nullptr || executable.weights() == nullptr) {
    return absl::InvalidArgumentError("the executable has no program, KV layout or weights");
  }
  KernelTable kernels;
  CudaModuleSpec module;
  module.prefill_min_rows = prefill_min_rows;
  const auto& instructions = *executable.program()->instructions();
  for (size_t i = 0; i < instructions.size(); ++i) {
    const kvx::Instruction& instruction = *instructions[i];
    auto fail = [&](const absl::Status& status) {
      return absl::Status(status.code(), absl::StrCat("CUDA codegen: instruction ", i, " (",
                                                      kvx::EnumNameOpCode(instruction.op()),
                                                      "): ", status.message()));
    };
    const size_t buffers =
        instruction.inputs()->size() + (instruction.outputs() ? instruction.outputs()->size() : 0);
    if (buffers + 2 > static_cast<size_t>(cuda_abi::kMaxLaunchBuffers)) {
      return fail(absl::UnimplementedError(absl::StrCat(
          buffers, " buffers; a kernel takes at most ", cuda_abi::kMaxLaunchBuffers - 2)));
    }
    absl::StatusOr<InstructionSpec> spec = Emit(EmitContext{executable, instruction, kernels});
    if (!spec.ok()) return fail(spec.status());
    module.instructions.push_back(*std::move(spec));
  }
  module.source = kernels.TranslationUnit();
  module.kernel_names = kernels.names();
  return module;
}

}  // namespace kvjit::codegen::cuda
