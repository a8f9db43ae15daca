#include "runtime/cuda/LaunchBinding.h"

#include <optional>

#include "absl/strings/str_cat.h"
#include "runtime/exec/OpTable.h"

namespace kvjit::cuda {
namespace {

void* Address(uintptr_t address) { return reinterpret_cast<void*>(address); }

}  // namespace

absl::StatusOr<BoundInstruction> BindInstruction(const kvx::Instruction& instruction,
                                                 const LaunchMemory& memory) {
  BoundInstruction bound;
  bound.inputs = static_cast<int>(instruction.inputs()->size());
  bound.outputs =
      instruction.outputs() != nullptr ? static_cast<int>(instruction.outputs()->size()) : 0;
  if (bound.scratch_index() >= cuda_abi::kMaxLaunchBuffers) {
    return absl::InvalidArgumentError(absl::StrCat(
        "has ", bound.inputs + bound.outputs, " buffers, more than kernels take"));
  }
  int slot = 0;
  for (const kvx::TensorRef* ref : *instruction.inputs()) {
    switch (ref->kind()) {
      case kvx::BufferKind::Arena:
        bound.args.buffers[slot] = Address(memory.arena + ref->offset());
        break;
      case kvx::BufferKind::Weight:
        if (ref->index() >= memory.weights.size()) {
          return absl::InvalidArgumentError(absl::StrCat("reads unknown weight ", ref->index()));
        }
        bound.args.buffers[slot] = Address(memory.weights[ref->index()]);
        break;
      case kvx::BufferKind::Input:
        if (ref->index() >= static_cast<uint32_t>(kvx::kStepInputCount)) {
          return absl::InvalidArgumentError(
              absl::StrCat("reads unknown step input ", ref->index()));
        }
        bound.args.buffers[slot] = Address(memory.step_inputs[ref->index()]);
        break;
    }
    ++slot;
  }
  for (int o = 0; o < bound.outputs; ++o) {
    const uintptr_t output = memory.arena + instruction.outputs()->Get(o)->offset();
    if (o == 0) bound.first_output = output;
    bound.args.buffers[slot++] = Address(output);
  }
  if (const std::optional<uint32_t> layer = runtime::KvCacheLayer(instruction)) {
    // Advanced to the instruction's layer, so that one kernel serves all.
    bound.args.buffers[cuda_abi::KvPoolBuffer(bound.inputs, bound.outputs)] =
        Address(memory.kv_pool + *layer * memory.kv_layer_stride_bytes);
  }
  return bound;
}

void SetStepSizes(const runtime::StepSizes& sizes, cuda_abi::LaunchArgs& args) {
  args.tokens = static_cast<int32_t>(sizes.tokens);
  args.logits_rows = static_cast<int32_t>(sizes.logits_rows);
  args.sequences = static_cast<int32_t>(sizes.sequences);
  args.max_blocks = static_cast<int32_t>(sizes.max_blocks);
}

}  // namespace kvjit::cuda
