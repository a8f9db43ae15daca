#include "runtime/quant/StorageType.h"

#include <array>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace kvjit::quant {
namespace {

struct TypeInfo {
  StorageType type;
  absl::string_view name;
  uint32_t ggml_id;
  int64_t elements_per_block;
  int64_t bytes_per_block;
};

// Block sizes follow ggml: a 32-element block keeps one (or two) f16 factors
// beside its packed values; the K types group 256 elements in a super-block
// with per-32 (Q4_K, Q5_K) or per-16 (Q6_K) sub-block scales.
constexpr std::array<TypeInfo, 11> kTypes = {{
    {StorageType::kF32, "f32", 0, 1, 4},
    {StorageType::kF16, "f16", 1, 1, 2},
    {StorageType::kBF16, "bf16", 30, 1, 2},
    {StorageType::kQ8_0, "q8_0", 8, 32, 2 + 32},
    {StorageType::kQ4_0, "q4_0", 2, 32, 2 + 16},
    {StorageType::kQ4_1, "q4_1", 3, 32, 2 + 2 + 16},
    {StorageType::kQ5_0, "q5_0", 6, 32, 2 + 4 + 16},
    {StorageType::kQ5_1, "q5_1", 7, 32, 2 + 2 + 4 + 16},
    {StorageType::kQ4_K, "q4_k", 12, 256, 2 + 2 + 12 + 128},
    {StorageType::kQ5_K, "q5_k", 13, 256, 2 + 2 + 12 + 32 + 128},
    {StorageType::kQ6_K, "q6_k", 14, 256, 128 + 64 + 16 + 2},
}};

constexpr bool IndexedByEnumerator() {
  for (size_t i = 0; i < kTypes.size(); ++i) {
    if (static_cast<size_t>(kTypes[i].type) != i) return false;
  }
  return true;
}
static_assert(IndexedByEnumerator(), "kTypes must list the enumerators in declaration order");

const TypeInfo& Info(StorageType type) { return kTypes[static_cast<size_t>(type)]; }

// ggml's names of its type ids, so that refusing one tells the user which
// quantization the file uses. Ids ggml retired stay empty.
absl::string_view GgmlName(uint32_t ggml_type) {
  static constexpr std::array<absl::string_view, 40> kNames = {
      "F32",     "F16",     "Q4_0",   "Q4_1",    "",       "",       "Q5_0",   "Q5_1",
      "Q8_0",    "Q8_1",    "Q2_K",   "Q3_K",    "Q4_K",   "Q5_K",   "Q6_K",   "Q8_K",
      "IQ2_XXS", "IQ2_XS",  "IQ3_XXS", "IQ1_S",  "IQ4_NL", "IQ3_S",  "IQ2_S",  "IQ4_XS",
      "I8",      "I16",     "I32",    "I64",     "F64",    "IQ1_M",  "BF16",   "",
      "",        "",        "TQ1_0",  "TQ2_0",   "",       "",       "",       "MXFP4"};
  return ggml_type < kNames.size() ? kNames[ggml_type] : absl::string_view();
}

std::string SupportedNames() {
  std::string names;
  for (const TypeInfo& info : kTypes) {
    absl::StrAppend(&names, names.empty() ? "" : ", ", info.name);
  }
  return names;
}

}  // namespace

absl::StatusOr<StorageType> StorageTypeFromGgml(uint32_t ggml_type) {
  for (const TypeInfo& info : kTypes) {
    if (info.ggml_id == ggml_type) return info.type;
  }
  absl::string_view name = GgmlName(ggml_type);
  if (name.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("ggml type ", ggml_type, " is not a known ggml type"));
  }
  return absl::UnimplementedError(absl::StrCat("ggml type ", ggml_type, ": ", name,
                                               " is not supported (kvjit reads ", SupportedNames(), ")"));
}

uint32_t GgmlTypeId(StorageType type) { return Info(type).ggml_id; }

absl::string_view StorageTypeName(StorageType type) { return Info(type).name; }

absl::StatusOr<StorageType> StorageTypeFromName(absl::string_view name) {
  for (const TypeInfo& info : kTypes) {
    if (info.name == name) return info.type;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown storage type '", name, "' (expected one of ", SupportedNames(), ")"));
}

int64_t ElementsPerBlock(StorageType type) { return Info(type).elements_per_block; }

int64_t BytesPerBlock(StorageType type) { return Info(type).bytes_per_block; }

absl::StatusOr<uint64_t> RowBytes(StorageType type, int64_t elements) {
  const TypeInfo& info = Info(type);
  if (elements < 0) {
    return absl::InvalidArgumentError(absl::StrCat("negative element count ", elements, " for ", info.name));
  }
  if (elements % info.elements_per_block != 0) {
    return absl::InvalidArgumentError(absl::StrCat(elements, " ", info.name,
                                                   " elements are not a multiple of the block size ",
                                                   info.elements_per_block));
  }
  const uint64_t blocks = static_cast<uint64_t>(elements / info.elements_per_block);
  const uint64_t block_bytes = static_cast<uint64_t>(info.bytes_per_block);
  if (blocks > std::numeric_limits<uint64_t>::max() / block_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(elements, " ", info.name, " elements overflow a 64-bit byte count"));
  }
  return blocks * block_bytes;
}

}  // namespace kvjit::quant
