#include "codegen/cuda/emulation/EmulatedStepRunner.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "runtime/cuda/CollectiveLayout.h"
#include "runtime/cuda/LaunchBinding.h"
#include "runtime/exec/StepValidation.h"

namespace kvjit::codegen::cuda {
absl::StatusOr<std::unique_ptr<EmulatedStepRunner>> EmulatedStepRunner::Create(
    const runtime::Executable& executable, const CudaModuleSpec& module, const HostKernels& kernels,
    int64_t num_blocks, EmulatedPaths paths) {
  const size_t instructions = executable.program().instructions()->size();
  if (module.instructions.size() != instructions) {
    return absl::InvalidArgumentError(
        absl::StrCat("the CUDA module describes ", module.instructions.size(),
                     " instructions; the program has ", instructions));
  }
  if (num_blocks <= 0) return absl::InvalidArgumentError("the KV pool needs at least one block");
  // A collective needs the other ranks' processes and NCCL between their
  // GPUs; summing or gathering over this process alone would check nothing
  // of it, so a rank's program is refused rather than simulated.
  const auto& program = *executable.program().instructions();
  for (size_t i = 0; i < program.size(); ++i) {
    if (::kvjit::cuda::IsCollective(program[i]->op())) {
      return absl::FailedPreconditionError(absl::StrCat(
          "instruction ", i, " (", kvx::EnumNameOpCode(program[i]->op()),
          "): the host emulation runs one process without NCCL, so it does not run the "
          "collectives of a tensor-parallel rank's program; run the ranks' CUDA kernels on GPUs "
          "(mpirun -np N kvjit run ... --device cuda)"));
    }
  }
  return std::unique_ptr<EmulatedStepRunner>(
      new EmulatedStepRunner(executable, module, kernels, num_blocks, paths));
}

EmulatedStepRunner::EmulatedStepRunner(const runtime::Executable& executable,
                                       const CudaModuleSpec& module, const HostKernels& kernels,
                                       int64_t num_blocks, EmulatedPaths paths)
    : executable_(executable),
      module_(module),
      kernels_(kernels),
      num_blocks_(num_blocks),
      paths_(paths),
      arena_(executable.program().arena_bytes() / sizeof(float) + 64, 0.0f),
      kv_pool_(num_blocks * executable.kv_layout().bytes_per_block(), 0) {}

absl::Status EmulatedStepRunner::CopyBlock(int64_t source, int64_t destination) {
  if (source < 0 || source >= num_blocks_ || destination < 0 || destination >= num_blocks_) {
    return absl::OutOfRangeError(absl::StrCat("copy of KV block ", source, " into ", destination,
                                              ": the pool has ", num_blocks_, " blocks"));
  }
  const uint64_t bytes = executable_.kv_layout().bytes_per_block();
  std::memmove(kv_pool_.data() + destination * bytes, kv_pool_.data() + source * bytes, bytes);
  return absl::OkStatus();
}

absl::StatusOr<absl::Span<const float>> EmulatedStepRunner::Run(const runtime::StepInputs& inputs) {
  const runtime::StepLimits limits = {max_tokens_per_step(), num_blocks_, vocab_size(), num_blocks_,
                                      block_size()};
  if (absl::Status valid = runtime::ValidateStep(inputs, limits); !valid.ok()) return valid;
  const runtime::StepSizes sizes = runtime::SizesOf(inputs);
  ::kvjit::cuda::LaunchMemory memory;
  memory.arena = reinterpret_cast<uintptr_t>(arena_.data());
  for (uint32_t w = 0; w < executable_.root().weights()->size(); ++w) {
    memory.weights.push_back(reinterpret_cast<uintptr_t>(executable_.WeightBytes(w).data()));
  }
  for (int k = 0; k < kvx::kStepInputCount; ++k) {
    memory.step_inputs[k] = reinterpret_cast<uintptr_t>(inputs.values[k].data());
  }
  memory.kv_pool = reinterpret_cast<uintptr_t>(kv_pool_.data());
  memory.kv_layer_stride_bytes = executable_.kv_layout().layer_stride_bytes();
  const auto& program = *executable_.program().instructions();
  for (size_t i = 0; i < program.size(); ++i) {
    const kvx::Instruction& instruction = *program[i];
    const InstructionSpec& spec = module_.instructions[i];
    const bool prefill = paths_ == EmulatedPaths::kPrefillOnly ||
                         SizeExprProduct(spec.rows, sizes) >= module_.prefill_min_rows;
    absl::StatusOr<::kvjit::cuda::BoundInstruction> bound =
        ::kvjit::cuda::BindInstruction(instruction, memory);
    absl::Status ran = bound.status();
    if (ran.ok()) {
      ::kvjit::cuda::SetStepSizes(sizes, bound->args);
      ran = RunPathOnHost(kernels_, module_, prefill ? spec.prefill : spec.decode, bound->inputs,
                          bound->outputs, bound->args, sizes);
    }
    if (!ran.ok()) {
      return absl::Status(
          ran.code(),
          absl::StrCat("instruction ", i, " (", kvx::EnumNameOpCode(instruction.op()), ", ",
                       prefill ? "prefill" : "decode", " path): ", ran.message()));
    }
  }
  const float* logits = Arena(executable_.program().logits()->offset());
  return absl::Span<const float>(logits, sizes.logits_rows * vocab_size());
}

}  // namespace kvjit::codegen::cuda
