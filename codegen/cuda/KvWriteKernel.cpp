// KvWrite: each new token's key and value into its slot of the paged pool,
// as runtime/cpu/PagedAttention.cpp's WriteKv stores them, byte for byte:
// one block of threads per token; keys, then values, each in its own type
// (runtime/schema/KvCacheFormat.h; keys and values may differ, and so have
// slot strides of their own). Where the layout rotates keys (values), the
// slot's row passes through shared memory and is multiplied by the
// Walsh-Hadamard matrix block by block (device/KvCache.cuh's
// hadamard_shared, RotateHadamard's operations in its order) before it is
// stored. f32, f16 and bf16 store an element per thread; q8_0, q4_0 and
// f8_e4m3 a 32-element block per warp (store_block_<type>: the block's
// scale from a warp reduction, then a code per lane).

#include <string_view>

#include "absl/strings/str_cat.h"
#include "codegen/cuda/KernelEmitter.h"
#include "runtime/core/StatusMacros.h"
#include "runtime/schema/KvCacheFormat.h"
#include "runtime/schema/OpOperands.h"

namespace kvjit::codegen::cuda {
namespace {

// A negative slot is a token that keeps no cache (padding): it writes
// nothing (the whole block returns, so no __syncthreads is left waiting).
constexpr char kKvWrite[] = R"cuda(
// KvWrite into the pool of the instruction's layer: @TYPES@.
extern "C" __global__ void __launch_bounds__(@THREADS@)
KVJIT_KERNEL(const kvjit::cuda_abi::LaunchArgs args) {
@POOL_CONSTANTS@  constexpr int kRow = kKvHeads * kHeadDim;
  const int64_t token = blockIdx.x;
  const int32_t slot = static_cast<const int32_t*>(args.buffers[@SLOT_MAPPING@])[token];
  if (slot < 0) return;
  uint8_t* block = static_cast<uint8_t*>(args.buffers[@POOL@]) +
                   static_cast<uint64_t>(slot / kBlockSize) * kBlockBytes;
  uint8_t* key_slot = block + static_cast<uint64_t>(slot % kBlockSize) * kKeySlotStride;
  uint8_t* value_slot =
      block + kValueOffset + static_cast<uint64_t>(slot % kBlockSize) * kValueSlotStride;
  const float* key = static_cast<const float*>(args.buffers[@KEY@]) + token * kRow;
  const float* value = static_cast<const float*>(args.buffers[@VALUE@]) + token * kRow;
  [[maybe_unused]] const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  [[maybe_unused]] const int warps = blockDim.x >> 5;
@SHARED@@STORE_KEYS@@STORE_VALUES@}
)cuda";

// Stores the row `source` (kRow floats) at `slot` as `type`, rotated in
// blocks of `rotation` first where that is not 0.
std::string StoreRow(const std::string& source, const std::string& slot, const std::string& type,
                     bool blocked, int64_t rotation, const std::string& scale) {
  std::string text;
  std::string from = source;
  if (rotation > 0) {
    absl::StrAppend(&text, "  __syncthreads();  // `row` is no longer read\n",
                    "  for (int i = threadIdx.x; i < kRow; i += blockDim.x) row[i] = ", source,
                    "[i];\n", "  hadamard_shared(row, kRow, ", rotation, ", ", scale, ");\n");
    from = "row";
  }
  if (blocked) {
    absl::StrAppend(&text, "  for (int b = warp; b < kRow / 32; b += warps) {\n",
                    "    store_block_", type, "(", slot, " + b * ",
                    kvx::FindKvCacheFormat(std::string_view(type))->bytes_per_block, ", ",
                    from, "[b * 32 + lane], lane);\n  }\n");
  } else {
    absl::StrAppend(&text, "  for (int i = threadIdx.x; i < kRow; i += blockDim.x) store_kv_", type,
                    "(", slot, ", i, ", from, "[i]);\n");
  }
  return text;
}

}  // namespace

std::string TypesComment(const KvCacheTypes& types) {
  auto one = [](const std::string& name, int64_t rotation) {
    return rotation > 0 ? absl::StrCat(name, " rotated in blocks of ", rotation) : name;
  };
  return absl::StrCat(one(types.key_name, types.key_rotation), " keys, ",
                      one(types.value_name, types.value_rotation), " values");
}

absl::StatusOr<InstructionSpec> EmitKvWrite(const EmitContext& context) {
  const kvx::KvLayout& layout = *context.executable.kv_layout();
  const kvx::KvWriteParams* params = context.instruction.params_as_KvWriteParams();
  if (params == nullptr) return absl::InvalidArgumentError("a KvWrite without its KvWriteParams");
  if (params->layer() >= layout.num_layers()) {
    return absl::InvalidArgumentError(absl::StrCat("layer ", params->layer(),
                                                   " of a KV layout of ", layout.num_layers()));
  }
  KVJIT_ASSIGN_OR_RETURN(std::string pool_constants, KvPoolConstants(layout));
  KVJIT_ASSIGN_OR_RETURN(KvCacheTypes types, KvCacheTypesOf(layout));
  using Operand = kvx::KvWriteOperand;
  const kvx::TensorRef& key = kvx::InputOf(context.instruction, Operand::Key);
  KVJIT_ASSIGN_OR_RETURN(int64_t kv_heads, StaticDim(key, 1, "the key's heads"));
  if (kv_heads != layout.num_kv_heads()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the key has ", kv_heads, " heads, the KV layout ", layout.num_kv_heads()));
  }
  const int64_t row = int64_t{layout.num_kv_heads()} * layout.head_dim();
  if ((types.key_rotation > 0 || types.value_rotation > 0) && row * 4 > 48 * 1024) {
    return absl::UnimplementedError(absl::StrCat(
        "rotating a slot of ", row, " elements exceeds the CUDA kernels' shared memory"));
  }
  const uint32_t threads = RowThreads(row);
  const uint32_t kernel = context.kernels.Add(
      "kv_write", Fill(kKvWrite, {{"TYPES", TypesComment(types)},
                                  {"SHARED", types.key_rotation > 0 || types.value_rotation > 0
                                                 ? "  __shared__ float row[kRow];\n"
                                                 : ""},
                                  {"STORE_KEYS", StoreRow("key", "key_slot", types.key_name,
                                                          types.key_blocked, types.key_rotation,
                                                          "kKeyRotationScale")},
                                  {"STORE_VALUES",
                                   StoreRow("value", "value_slot", types.value_name,
                                            types.value_blocked, types.value_rotation,
                                            "kValueRotationScale")},
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
