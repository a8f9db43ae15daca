#include "codegen/cuda/CudaCodegen.h"

#include <iterator>

#include "absl/strings/str_cat.h"
#include "codegen/cuda/KernelEmitter.h"
#include "codegen/cuda/KernelTable.h"
#include "runtime/schema/CudaLaunchAbi.h"
#include "runtime/schema/EnumTable.h"

namespace kvjit::codegen::cuda {
namespace {

using Emitter = absl::StatusOr<InstructionSpec> (*)(const EmitContext& context);

struct EmitterEntry {
  kvx::OpCode op;
  Emitter emit;
};

// Each opcode's kernel emitter, in OpCode order.
constexpr EmitterEntry kEmitters[] = {
    {kvx::OpCode::Embedding, EmitEmbedding},     {kvx::OpCode::Linear, EmitLinear},
    {kvx::OpCode::RmsNorm, EmitRmsNorm},         {kvx::OpCode::AddRmsNorm, EmitAddRmsNorm},
    {kvx::OpCode::SwiGlu, EmitSwiGlu},           {kvx::OpCode::Rope, EmitRope},
    {kvx::OpCode::Elementwise, EmitElementwise}, {kvx::OpCode::KvWrite, EmitKvWrite},
    {kvx::OpCode::KvAttention, EmitKvAttention}, {kvx::OpCode::GatherRows, EmitGatherRows},
    {kvx::OpCode::Copy, EmitCopy},
};

static_assert(kvx::CoversEnumInOrder(kEmitters),
              "kEmitters has each kvx::OpCode's CUDA emitter, in the enum's order: a new opcode "
              "needs its emitter here");

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
