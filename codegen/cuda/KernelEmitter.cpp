#include "codegen/cuda/KernelEmitter.h"

#include <cmath>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "runtime/core/StatusMacros.h"
#include "runtime/exec/KvxTypes.h"
#include "runtime/quant/StorageType.h"
#include "runtime/schema/CudaLaunchAbi.h"
#include "runtime/schema/KvCacheFormat.h"

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

absl::StatusOr<KvCacheTypes> KvCacheTypesOf(const kvx::KvLayout& layout) {
  const kvx::KvCacheFormat* keys = kvx::FindKvCacheFormat(layout.key_type());
  const kvx::KvCacheFormat* values = kvx::FindKvCacheFormat(layout.value_type());
  if (keys == nullptr || values == nullptr) {
    return absl::UnimplementedError(absl::StrCat(
        "the CUDA kernels keep the KV cache in ", kvx::kKvCacheFormatNames, ", not ",
        kvx::EnumNameStorageType(layout.key_type()), " keys and ",
        kvx::EnumNameStorageType(layout.value_type()), " values"));
  }
  const int64_t kv_heads = layout.num_kv_heads(), head_dim = layout.head_dim();
  for (const auto& [format, what] : {std::pair{keys, "keys"}, std::pair{values, "values"}}) {
    if (head_dim <= 0 || head_dim % format->elements_per_block != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "a cache of ", format->name, " ", what, " stores each head in blocks of ",
          format->elements_per_block, " elements; head_dim ", head_dim, " is not a multiple of ",
          format->elements_per_block));
    }
  }
  const std::optional<uint64_t> key_slot = kvx::KvSlotBytes(*keys, kv_heads, head_dim);
  const std::optional<uint64_t> value_slot = kvx::KvSlotBytes(*values, kv_heads, head_dim);
  if (!key_slot || !value_slot || *key_slot != layout.key_slot_stride_bytes() ||
      *value_slot != layout.value_slot_stride_bytes()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the KV layout's slot strides (", layout.key_slot_stride_bytes(), " bytes of keys, ",
        layout.value_slot_stride_bytes(), " of values) are not those of ", kv_heads, " heads of ",
        head_dim, " ", kvx::KvCacheTypesName(layout.key_type(), layout.value_type()), " elements"));
  }
  if (!kvx::IsValidRotation(layout.key_rotation(), head_dim) ||
      !kvx::IsValidRotation(layout.value_rotation(), head_dim)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rotations in blocks of ", layout.key_rotation(), " (keys) and ", layout.value_rotation(),
        " (values) are not powers of two dividing head_dim ", head_dim));
  }
  return KvCacheTypes{keys->name, values->name,
                      static_cast<int64_t>(*key_slot / static_cast<uint64_t>(kv_heads)),
                      static_cast<int64_t>(*value_slot / static_cast<uint64_t>(kv_heads)),
                      keys->elements_per_block > 1, values->elements_per_block > 1,
                      layout.key_rotation(), layout.value_rotation(),
                      kvx::QuantizesQuery(layout.key_type())};
}

std::string RotationScale(int64_t block) {
  // As RotateHadamard rounds it: 1 / sqrt(block) in f32.
  return FloatLiteral(block > 0 ? 1.0f / std::sqrt(static_cast<float>(block)) : 1.0f);
}

absl::StatusOr<std::string> KvPoolConstants(const kvx::KvLayout& layout) {
  KVJIT_ASSIGN_OR_RETURN(KvCacheTypes types, KvCacheTypesOf(layout));
  return absl::StrCat(
      "  [[maybe_unused]] constexpr int kKvHeads = ", layout.num_kv_heads(), ";\n",
      "  [[maybe_unused]] constexpr int kHeadDim = ", layout.head_dim(), ";\n",
      "  [[maybe_unused]] constexpr int kBlockSize = ", layout.block_size(), ";\n",
      "  [[maybe_unused]] constexpr uint64_t kBlockBytes = ", layout.bytes_per_block(), "ull;\n",
      "  [[maybe_unused]] constexpr uint64_t kKeySlotStride = ", layout.key_slot_stride_bytes(),
      "ull;\n",
      "  [[maybe_unused]] constexpr uint64_t kValueSlotStride = ", layout.value_slot_stride_bytes(),
      "ull;\n",
      "  [[maybe_unused]] constexpr uint64_t kValueOffset = ", layout.value_offset_bytes(), "ull;\n",
      "  [[maybe_unused]] constexpr uint64_t kKeyHeadBytes = ", types.key_head_bytes, "ull;\n",
      "  [[maybe_unused]] constexpr uint64_t kValueHeadBytes = ", types.value_head_bytes, "ull;\n",
      "  [[maybe_unused]] constexpr int kKeyRotation = ", types.key_rotation, ";  // 0: none\n",
      "  [[maybe_unused]] constexpr int kValueRotation = ", types.value_rotation, ";\n",
      "  [[maybe_unused]] constexpr bool kQuantizeQuery = ", types.quantize_query ? "true" : "false",
      ";  // the query rounded to q8_0 before its dot products\n",
      "  [[maybe_unused]] constexpr float kKeyRotationScale = ", RotationScale(types.key_rotation),
      ";\n", "  [[maybe_unused]] constexpr float kValueRotationScale = ",
      RotationScale(types.value_rotation), ";\n");
}

std::string KvElementFunctions(const kvx::KvLayout& layout) {
  const kvx::KvCacheFormat* keys = kvx::FindKvCacheFormat(layout.key_type());
  const kvx::KvCacheFormat* values = kvx::FindKvCacheFormat(layout.value_type());
  // KvPoolConstants, which every caller emits, refuses other types.
  const std::string key_name = keys ? keys->name : "f32";
  const std::string value_name = values ? values->name : "f32";
  return absl::StrCat(
      "KVJIT_DEVICE float KVJIT_KERNEL_load_key(const uint8_t* head, int d) {\n  return load_kv_",
      key_name, "(head, d);\n}\n",
      "KVJIT_DEVICE float KVJIT_KERNEL_load_value(const uint8_t* head, int d) {\n  return load_kv_",
      value_name, "(head, d);\n}\n");
}

LaunchSpec Launch(uint32_t kernel, uint32_t threads, SizeExpr grid_x, SizeExpr grid_y,
                  SizeExpr grid_z) {
  return LaunchSpec{kernel, threads, std::move(grid_x), std::move(grid_y), std::move(grid_z)};
}

InstructionSpec SamePaths(SizeExpr rows, PathSpec path) {
  return InstructionSpec{std::move(rows), path, path};
}

}  // namespace kvjit::codegen::cuda
