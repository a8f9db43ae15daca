// KvWrite: each new token's key and value into its slot of the paged pool,
// as runtime/cpu/PagedAttention.cpp's WriteKv stores them.

#include "absl/strings/str_cat.h"
#include "codegen/cuda/KernelEmitter.h"
#include "runtime/core/StatusMacros.h"
#include "runtime/schema/OpOperands.h"

namespace kvjit::codegen::cuda {
namespace {

// A negative slot is a token that keeps no cache (padding): it writes nothing.
constexpr char kKvWrite[] = R"cuda(
// KvWrite into the pool of the instruction's layer.
@ELEMENT_FUNCTIONS@extern "C" __global__ void __launch_bounds__(@THREADS@)
KVJIT_KERNEL(const kvjit::cuda_abi::LaunchArgs args) {
@POOL_CONSTANTS@  constexpr int kRow = kKvHeads * kHeadDim;
  const int64_t token = blockIdx.x;
  const int32_t slot = static_cast<const int32_t*>(args.buffers[@SLOT_MAPPING@])[token];
  if (slot < 0) return;
  uint8_t* key_slot = static_cast<uint8_t*>(args.buffers[@POOL@]) +
                      static_cast<uint64_t>(slot / kBlockSize) * kBlockBytes +
                      static_cast<uint64_t>(slot % kBlockSize) * kSlotStride;
  uint8_t* value_slot = key_slot + kValueOffset;
  const float* key = static_cast<const float*>(args.buffers[@KEY@]) + token * kRow;
  const float* value = static_cast<const float*>(args.buffers[@VALUE@]) + token * kRow;
  for (int i = threadIdx.x; i < kRow; i += blockDim.x) {
    KVJIT_KERNEL_store_kv(key_slot, i, key[i]);
    KVJIT_KERNEL_store_kv(value_slot, i, value[i]);
  }
}
)cuda";

}  // namespace

absl::StatusOr<InstructionSpec> EmitKvWrite(const EmitContext& context) {
  const kvx::KvLayout& layout = *context.executable.kv_layout();
  const kvx::KvWriteParams* params = context.instruction.params_as_KvWriteParams();
  if (params == nullptr) return absl::InvalidArgumentError("a KvWrite without its KvWriteParams");
  if (params->layer() >= layout.num_layers()) {
    return absl::InvalidArgumentError(absl::StrCat("layer ", params->layer(),
                                                   " of a KV layout of ", layout.num_layers()));
  }
  KVJIT_ASSIGN_OR_RETURN(std::string pool_constants, KvPoolConstants(layout));
  using Operand = kvx::KvWriteOperand;
  const kvx::TensorRef& key = kvx::InputOf(context.instruction, Operand::Key);
  KVJIT_ASSIGN_OR_RETURN(int64_t kv_heads, StaticDim(key, 1, "the key's heads"));
  if (kv_heads != layout.num_kv_heads()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the key has ", kv_heads, " heads, the KV layout ", layout.num_kv_heads()));
  }
  const uint32_t threads = RowThreads(int64_t{layout.num_kv_heads()} * layout.head_dim());
  const uint32_t kernel = context.kernels.Add(
      "kv_write", Fill(kKvWrite, {{"ELEMENT_FUNCTIONS", KvElementFunctions(layout)},
                                  {"THREADS", absl::StrCat(threads)},
                                  {"POOL_CONSTANTS", pool_constants},
                                  {"POOL", absl::StrCat(KvPoolBuffer(context.instruction))},
                                  {"KEY", absl::StrCat(kvx::OperandIndex(Operand::Key))},
                                  {"VALUE", absl::StrCat(kvx::OperandIndex(Operand::Value))},
                                  {"SLOT_MAPPING",
                                   absl::StrCat(kvx::OperandIndex(Operand::SlotMapping))}}));
  PathSpec path;
  path.launches.push_back(Launch(kernel, threads, ExtentFactors(key, 0, 1)));
  return SamePaths(StepTokens(), path);
}

}  // namespace kvjit::codegen::cuda
