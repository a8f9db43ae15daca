#include "codegen/cuda/KernelEmitter.h"

#include "absl/strings/str_cat.h"
#include "runtime/core/StatusMacros.h"
#include "runtime/exec/KvxTypes.h"
#include "runtime/quant/StorageType.h"
#include "runtime/schema/CudaLaunchAbi.h"

namespace kvjit::codegen::cuda {

namespace {

std::string DimExpr(const kvx::Dim& dim) {
  switch (dim.kind()) {
    case kvx::DimKind::Static:
      return absl::StrCat(dim.size());
    case kvx::DimKind::Tokens:
      return "args.tokens";
    case kvx::DimKind::LogitsRows:
      return "args.logits_rows";
    case kvx::DimKind::Sequences:
      return "args.sequences";
    case kvx::DimKind::MaxBlocks:
      return "args.max_blocks";
    case kvx::DimKind::SequencesPlusOne:
      return "(args.sequences + 1)";
  }
  return "0";
}

int OutputCount(const kvx::Instruction& instruction) {
  return instruction.outputs() ? static_cast<int>(instruction.outputs()->size()) : 0;
}

}  // namespace

std::string ExtentExpr(const kvx::TensorRef& ref, size_t begin, size_t end) {
  std::string expr = "static_cast<int64_t>(1)";
  for (size_t i = begin; i < end; ++i) absl::StrAppend(&expr, " * ", DimExpr(*ref.shape()->Get(i)));
  return absl::StrCat("(", expr, ")");
}

SizeExpr ExtentFactors(const kvx::TensorRef& ref, size_t begin, size_t end) {
  SizeExpr factors;
  for (size_t i = begin; i < end; ++i) {
    const kvx::Dim& dim = *ref.shape()->Get(i);
    factors.emplace_back(dim.kind(), dim.size(), 1);
  }
  return factors;
}

SizeExpr DivideFirst(SizeExpr factors, uint32_t divisor) {
  if (factors.empty()) return {kvx::SizeFactor(kvx::DimKind::Static, 1, 1)};
  // The largest static factor takes the division where there is one, so
  // that few blocks are idle; otherwise the first.
  auto target = factors.begin();
  for (auto it = factors.begin(); it != factors.end(); ++it) {
    if (it->kind() == kvx::DimKind::Static && it->size() > target->size()) target = it;
  }
  *target = kvx::SizeFactor(target->kind(), target->size(), target->divisor() * divisor);
  return factors;
}

SizeExpr Static(int64_t size) { return {kvx::SizeFactor(kvx::DimKind::Static, size, 1)}; }

SizeExpr StepTokens() { return {kvx::SizeFactor(kvx::DimKind::Tokens, 0, 1)}; }

std::string Buffer(int index, absl::string_view type) {
  return absl::StrCat("static_cast<", type, "*>(args.buffers[", index, "])");
}

absl::StatusOr<std::string> ElementLoad(const EmitContext& context, int input,
                                        absl::string_view index) {
  const kvx::TensorRef& ref = *context.instruction.inputs()->Get(input);
  const std::string at = absl::StrCat("[", index, "]");
  switch (ref.kind()) {
    case kvx::BufferKind::Arena: {
      if (ref.row_stride() == 0) return absl::StrCat(Buffer(input, "const float"), at);
      // A column view: element i of its dense order lies in row i / width,
      // `row_stride` floats per row.
      int64_t width = 1;
      for (size_t d = 1; d < ref.shape()->size(); ++d) {
        const kvx::Dim& dim = *ref.shape()->Get(d);
        if (dim.kind() != kvx::DimKind::Static) {
          return absl::UnimplementedError("a column view whose rows are not of a static width");
        }
        width *= dim.size();
      }
      if (ref.shape()->size() < 2 || width <= 0) {
        return absl::UnimplementedError("a column view that is not rows of a static width");
      }
      return absl::StrCat(Buffer(input, "const float"), "[(", index, ") / ", width, " * ",
                          ref.row_stride(), "ull + (", index, ") % ", width, "]");
    }
    case kvx::BufferKind::Input:
      return absl::StrCat("static_cast<float>(", Buffer(input, "const int32_t"), at, ")");
    case kvx::BufferKind::Weight:
      break;
  }
  KVJIT_ASSIGN_OR_RETURN(const kvx::Weight* weight, WeightOf(context, input));
  switch (weight->storage()) {
    case kvx::StorageType::F32:
      return absl::StrCat(Buffer(input, "const float"), at);
    case kvx::StorageType::F16:
      return absl::StrCat("half_to_float(", Buffer(input, "const uint16_t"), at, ")");
    case kvx::StorageType::BF16:
      return absl::StrCat("bf16_to_float(", Buffer(input, "const uint16_t"), at, ")");
    default:
      return absl::UnimplementedError(
          absl::StrCat("weight '", weight->name()->str(), "' is stored as ",
                       kvx::EnumNameStorageType(weight->storage()),
                       ", which the CUDA kernels read only as a matrix (Linear, Embedding)"));
  }
}

int OutputBuffer(const kvx::Instruction& instruction, int output) {
  return static_cast<int>(instruction.inputs()->size()) + output;
}

int KvPoolBuffer(const kvx::Instruction& instruction) {
  return cuda_abi::KvPoolBuffer(static_cast<int>(instruction.inputs()->size()),
                                OutputCount(instruction));
}

int ScratchBuffer(const kvx::Instruction& instruction) {
  return cuda_abi::ScratchBuffer(static_cast<int>(instruction.inputs()->size()),
                                 OutputCount(instruction));
}

absl::StatusOr<std::string> DequantFunction(kvx::StorageType storage) {
  KVJIT_ASSIGN_OR_RETURN(quant::StorageType type, runtime::FromKvxStorage(storage));
  return absl::StrCat("dequant_", quant::StorageTypeName(type));
}

absl::StatusOr<uint64_t> WeightRowBytes(kvx::StorageType storage, int64_t cols) {
  KVJIT_ASSIGN_OR_RETURN(quant::StorageType type, runtime::FromKvxStorage(storage));
  return quant::RowBytes(type, cols);
}

absl::StatusOr<const kvx::Weight*> WeightOf(const EmitContext& context, int input) {
  const kvx::TensorRef& ref = *context.instruction.inputs()->Get(input);
  if (ref.kind() != kvx::BufferKind::Weight) {
    return absl::InvalidArgumentError(absl::StrCat("input ", input, " is not a weight"));
  }
  return context.executable.weights()->Get(ref.index());
}

absl::StatusOr<std::string> KvPoolConstants(const kvx::KvLayout& layout) {
  if (layout.key_type() != layout.value_type() ||
      (layout.key_type() != kvx::StorageType::F32 && layout.key_type() != kvx::StorageType::F16)) {
    return absl::UnimplementedError(absl::StrCat(
        "the CUDA kernels keep the KV cache's keys and values both in f32 or both in f16, not ",
        kvx::EnumNameStorageType(layout.key_type()), " keys and ",
        kvx::EnumNameStorageType(layout.value_type()), " values"));
  }
  if (layout.key_rotation() != 0 || layout.value_rotation() != 0) {
    return absl::UnimplementedError(absl::StrCat("the CUDA kernels keep the KV cache unrotated, not rotated in blocks of ",
                                                 layout.key_rotation(), " (keys) and ", layout.value_rotation(),
                                                 " (values)"));
  }
  const int element_bytes = layout.key_type() == kvx::StorageType::F32 ? 4 : 2;
  return absl::StrCat(
      "  [[maybe_unused]] constexpr int kKvHeads = ", layout.num_kv_heads(), ";\n",
      "  [[maybe_unused]] constexpr int kHeadDim = ", layout.head_dim(), ";\n",
      "  [[maybe_unused]] constexpr int kBlockSize = ", layout.block_size(), ";\n",
      "  [[maybe_unused]] constexpr uint64_t kBlockBytes = ", layout.bytes_per_block(), "ull;\n",
      "  [[maybe_unused]] constexpr uint64_t kSlotStride = ", layout.key_slot_stride_bytes(), "ull;\n",
      "  [[maybe_unused]] constexpr uint64_t kValueOffset = ", layout.value_offset_bytes(),
      "ull;\n", "  [[maybe_unused]] constexpr int kElementBytes = ", element_bytes, ";\n");
}

std::string KvElementFunctions(const kvx::KvLayout& layout) {
  if (layout.key_type() == kvx::StorageType::F32) {
    return R"cuda(KVJIT_DEVICE float KVJIT_KERNEL_load_kv(const uint8_t* row, int d) {
  return reinterpret_cast<const float*>(row)[d];
}
KVJIT_DEVICE void KVJIT_KERNEL_store_kv(uint8_t* row, int d, float value) {
  reinterpret_cast<float*>(row)[d] = value;
}
)cuda";
  }
  return R"cuda(KVJIT_DEVICE float KVJIT_KERNEL_load_kv(const uint8_t* row, int d) {
  return half_to_float(reinterpret_cast<const uint16_t*>(row)[d]);
}
KVJIT_DEVICE void KVJIT_KERNEL_store_kv(uint8_t* row, int d, float value) {
  reinterpret_cast<uint16_t*>(row)[d] = float_to_half(value);
}
)cuda";
}

LaunchSpec Launch(uint32_t kernel, uint32_t threads, SizeExpr grid_x, SizeExpr grid_y,
                  SizeExpr grid_z) {
  return LaunchSpec{kernel, threads, std::move(grid_x), std::move(grid_y), std::move(grid_z)};
}

InstructionSpec SamePaths(SizeExpr rows, PathSpec path) {
  return InstructionSpec{std::move(rows), path, path};
}

}  // namespace kvjit::codegen::cuda
