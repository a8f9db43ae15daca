#ifndef KVJIT_RUNTIME_QUANT_STORAGETYPE_H_
#define KVJIT_RUNTIME_QUANT_STORAGETYPE_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kvjit::quant {

// How a weight's elements are stored. The quantized types use ggml's block
// layouts byte for byte, so GGUF tensor data can be used without repacking.
enum class StorageType {
  kF32,
  kF16,
  kBF16,
  kQ8_0,
  kQ4_0,
  kQ4_1,
  kQ5_0,
  kQ5_1,
  kQ4_K,
  kQ5_K,
  kQ6_K,
};

// Maps a ggml type id (as stored in GGUF tensor infos) to a storage type; ids
// of ggml types kvjit cannot read give an error naming the id and, where
// known, the ggml name.
absl::StatusOr<StorageType> StorageTypeFromGgml(uint32_t ggml_type);
uint32_t GgmlTypeId(StorageType type);

// Lowercase names ("f32", "q4_k", ...), as used in IR attributes and on the CLI.
absl::string_view StorageTypeName(StorageType type);
absl::StatusOr<StorageType> StorageTypeFromName(absl::string_view name);

int64_t ElementsPerBlock(StorageType type);
int64_t BytesPerBlock(StorageType type);

// Bytes that `elements` consecutive elements occupy; an error where
// `elements` is negative, not a whole number of blocks, or the size overflows.
absl::StatusOr<uint64_t> RowBytes(StorageType type, int64_t elements);

}  // namespace kvjit::quant

#endif  // KVJIT_RUNTIME_QUANT_STORAGETYPE_H_
