#ifndef KVJIT_CODEGEN_CUDA_KERNELEMITTER_H_
#define KVJIT_CODEGEN_CUDA_KERNELEMITTER_H_

#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "codegen/cuda/CudaModuleSpec.h"
#include "codegen/cuda/KernelTable.h"
#include "codegen/cuda/CudaRowKernelEmitter.h"
#include "runtime/schema/kvx_generated.h"

// Kernel emitters of the opcodes that are not row-wise (each row-wise
// opcode's is in its file under rowops/): each turns one instruction of
// a verified program into kernels (added to the module's KernelTable) and
// the launches that run them. The kernels compute what runtime/cpu/CpuStepRunner.cpp and
// runtime/cpu compute for the same instruction; every shape, constant and
// weight format the instruction fixes is baked into the kernel's text.
namespace kvjit::codegen::cuda {

struct EmitContext {
  const kvx::Executable& executable;
  const kvx::Instruction& instruction;
  KernelTable& kernels;
};

absl::StatusOr<InstructionSpec> EmitEmbedding(const EmitContext& context);
absl::StatusOr<InstructionSpec> EmitLinear(const EmitContext& context);
absl::StatusOr<InstructionSpec> EmitElementwise(const EmitContext& context);
absl::StatusOr<InstructionSpec> EmitKvWrite(const EmitContext& context);
absl::StatusOr<InstructionSpec> EmitKvAttention(const EmitContext& context);
absl::StatusOr<InstructionSpec> EmitGatherRows(const EmitContext& context);
absl::StatusOr<InstructionSpec> EmitCopy(const EmitContext& context);
// Tensor parallelism's collectives: the kernels around the collective that
// the runner calls between a path's launches and its epilogue
// (runtime/cuda/CollectiveLayout.h).
absl::StatusOr<InstructionSpec> EmitAllReduce(const EmitContext& context);
absl::StatusOr<InstructionSpec> EmitAllGather(const EmitContext& context);

// The instruction's one kernel, one thread per element of output 0:
// `body` computes element `i`.
absl::StatusOr<InstructionSpec> ElementKernel(const EmitContext& context, absl::string_view stem,
                                              const std::string& comment, const std::string& body);

// ---- Helpers shared by the emitters ----
//
// Beside those of CudaRowKernelEmitter.h (Fill, FloatLiteral, StaticDim,
// RowThreads), which the row-wise ops' emitters use too.

// Dimensions [begin, end) of a reference: the product as a C++ int64_t
// expression over `args` (the kernel's LaunchArgs), and as size factors.
std::string ExtentExpr(const kvx::TensorRef& ref, size_t begin, size_t end);
SizeExpr ExtentFactors(const kvx::TensorRef& ref, size_t begin, size_t end);

// `factors` with the first divided by `divisor` (ceil): enough blocks of
// `divisor` threads for the product's elements.
SizeExpr DivideFirst(SizeExpr factors, uint32_t divisor);
SizeExpr Static(int64_t size);
SizeExpr StepTokens();

// `static_cast<const T*>(args.buffers[index])`, T a C++ type name.
std::string Buffer(int index, absl::string_view type);

// A C++ expression loading element `index` of input `input` as a float:
// arena and f32 weights directly (a column view through its row stride),
// f16 and bf16 weights converted. Quantized weights are an error (they are
// matrices, read by dequant_<type>).
absl::StatusOr<std::string> ElementLoad(const EmitContext& context, int input,
                                        absl::string_view index);

// The buffer index of output `output`, and those of the KV pool and scratch.
int OutputBuffer(const kvx::Instruction& instruction, int output);
int KvPoolBuffer(const kvx::Instruction& instruction);
int ScratchBuffer(const kvx::Instruction& instruction);

// dequant_<type> of the prelude and the bytes of one row of `cols` elements.
absl::StatusOr<std::string> DequantFunction(kvx::StorageType storage);
absl::StatusOr<uint64_t> WeightRowBytes(kvx::StorageType storage, int64_t cols);

// The weight an input refers to, or an error.
absl::StatusOr<const kvx::Weight*> WeightOf(const EmitContext& context, int input);

// The paged KV pool's element types (runtime/schema/KvCacheFormat.h), as
// the kernels need them: each type's name (the suffix of the prelude's
// load_kv_<name>, store_kv_<name> and store_block_<name>,
// device/KvCache.cuh), the bytes of one head of keys and of values, whether
// each is stored in 32-element blocks, and the rotations (0: none). An
// error where a type is not one of kKvCacheFormats, head_dim is not a whole
// number of a type's blocks, the slot strides are not the types', or a
// rotation is not a power of two dividing head_dim.
struct KvCacheTypes {
  std::string key_name, value_name;
  int64_t key_head_bytes = 0, value_head_bytes = 0;
  bool key_blocked = false, value_blocked = false;
  int64_t key_rotation = 0, value_rotation = 0;
  // Scores against these keys take the query rounded to q8_0
  // (KvCacheFormat.h's QuantizesQuery: q8_0 and q4_0 keys).
  bool quantize_query = false;
};
absl::StatusOr<KvCacheTypes> KvCacheTypesOf(const kvx::KvLayout& layout);
// 1/sqrt(block) rounded to f32 as RotateHadamard rounds it, as a literal
// (1 for 0).
std::string RotationScale(int64_t block);
// "q8_0 rotated in blocks of 64 keys, f16 values", for kernels' comments.
std::string TypesComment(const KvCacheTypes& types);

// The paged KV pool for a kernel's body: constexpr kKvHeads, kHeadDim,
// kBlockSize, kBlockBytes, kKeySlotStride, kValueSlotStride, kValueOffset
// (bytes; see kvx.fbs KvLayout; keys and values have strides of their own,
// as their types may differ), kKeyHeadBytes and kValueHeadBytes (one head's
// row), kKeyRotation and kValueRotation (the Walsh-Hadamard blocks, 0 for
// none) and their scales 1/sqrt(R), and kQuantizeQuery (whether each query
// head is rounded to q8_0 before scoring, KvCacheFormat.h's QuantizesQuery).
// Kernels get the pool already advanced to
// their instruction's layer (runtime/schema/CudaLaunchAbi.h). Errors as
// KvCacheTypesOf.
absl::StatusOr<std::string> KvPoolConstants(const kvx::KvLayout& layout);

// Device functions KVJIT_KERNEL_load_key(head, d) and
// KVJIT_KERNEL_load_value(head, d): element d of one head's row of keys
// (values) as f32, by the pool's types (device/KvCache.cuh's load_kv_<type>).
std::string KvElementFunctions(const kvx::KvLayout& layout);

// One launch; an instruction whose decode and prefill paths are the same.
LaunchSpec Launch(uint32_t kernel, uint32_t threads, SizeExpr grid_x, SizeExpr grid_y = {},
                  SizeExpr grid_z = {});
InstructionSpec SamePaths(SizeExpr rows, PathSpec path);

}  // namespace kvjit::codegen::cuda

#endif  // KVJIT_CODEGEN_CUDA_KERNELEMITTER_H_
