#include "codegen/cuda/CudaCodegen.h"

#include <iterator>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "codegen/cuda/KernelEmitter.h"
#include "codegen/cuda/KernelTable.h"
#include "codegen/cuda/rowops/RowOpEmitters.h"
#include "runtime/core/StatusMacros.h"
#include "runtime/schema/CudaLaunchAbi.h"
#include "runtime/schema/EnumTable.h"

namespace kvjit::codegen::cuda {
namespace {

using Emitter = absl::StatusOr<InstructionSpec> (*)(const EmitContext& context);

struct EmitterEntry {
  kvx::OpCode op;
  Emitter emit;
};

// The generator as a row-wise op's emitter sees it: the op writes one
// kernel, placed here in the module with its launch on both paths.
class RowKernelEmitter : public CudaRowKernelEmitter {
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

// A row-wise op's emitter (rowops/) as an entry of the table.
template <RowOpEmitter kEmitRowOp>
absl::StatusOr<InstructionSpec> EmitRowOp(const EmitContext& context) {
  RowKernelEmitter emitter(context);
  KVJIT_RETURN_IF_ERROR(kEmitRowOp(emitter));
  return std::move(emitter).spec();
}

// Each opcode's emitter, in kvx::OpCode's order.
constexpr EmitterEntry kEmitters[] = {
    {kvx::OpCode::Embedding, EmitEmbedding},
    {kvx::OpCode::Linear, EmitLinear},
    {kvx::OpCode::RmsNorm, EmitRowOp<EmitRmsNorm>},
    {kvx::OpCode::AddRmsNorm, EmitRowOp<EmitAddRmsNorm>},
    {kvx::OpCode::SwiGlu, EmitRowOp<EmitSwiGlu>},
    {kvx::OpCode::Rope, EmitRowOp<EmitRope>},
    {kvx::OpCode::Elementwise, EmitElementwise},
    {kvx::OpCode::KvWrite, EmitKvWrite},
    {kvx::OpCode::KvAttention, EmitKvAttention},
    {kvx::OpCode::GatherRows, EmitGatherRows},
    {kvx::OpCode::Copy, EmitCopy},
    {kvx::OpCode::AllReduce, EmitAllReduce},
    {kvx::OpCode::AllGather, EmitAllGather},
};

static_assert(kvx::CoversEnumInOrder(kEmitters),
              "kEmitters has one emitter per kvx::OpCode, in the enum's order: a new opcode "
              "needs its CUDA emitter here (a row-wise one's in rowops/)");

absl::StatusOr<InstructionSpec> Emit(const EmitContext& context) {
  const size_t index = static_cast<size_t>(context.instruction.op());
  if (index >= std::size(kEmitters)) {
    return absl::UnimplementedError("an opcode without a CUDA kernel");
  }
  return kEmitters[index].emit(context);
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
