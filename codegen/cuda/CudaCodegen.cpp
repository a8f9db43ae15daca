#include "codegen/cuda/CudaCodegen.h"

#include "absl/strings/str_cat.h"
#include "codegen/cuda/KernelEmitter.h"
#include "codegen/cuda/KernelTable.h"
#include "runtime/schema/CudaLaunchAbi.h"

namespace kvjit::codegen::cuda {
namespace {

absl::StatusOr<InstructionSpec> Emit(const EmitContext& context) {
  switch (context.instruction.op()) {
    case kvx::OpCode::Embedding:
      return EmitEmbedding(context);
    case kvx::OpCode::Linear:
      return EmitLinear(context);
    case kvx::OpCode::RmsNorm:
      return EmitRmsNorm(context);
    case kvx::OpCode::AddRmsNorm:
      return EmitAddRmsNorm(context);
    case kvx::OpCode::SwiGlu:
      return EmitSwiGlu(context);
    case kvx::OpCode::Rope:
      return EmitRope(context);
    case kvx::OpCode::Elementwise:
      return EmitElementwise(context);
    case kvx::OpCode::KvWrite:
      return EmitKvWrite(context);
    case kvx::OpCode::KvAttention:
      return EmitKvAttention(context);
    case kvx::OpCode::GatherRows:
      return EmitGatherRows(context);
    case kvx::OpCode::Copy:
      return EmitCopy(context);
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
