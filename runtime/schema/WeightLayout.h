#ifndef KVJIT_RUNTIME_SCHEMA_WEIGHTLAYOUT_H_
#define KVJIT_RUNTIME_SCHEMA_WEIGHTLAYOUT_H_

// The weight layouts of kvx.fbs's WeightLayout, shared by the compiler (which
// repacks a weight's GGUF bytes when it chooses a layout) and the runtime
// (which checks a weight's layout on load and reads it in its kernels).
// Plain C++ over the generated schema: no MLIR, no runtime library.

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "runtime/schema/kvx_generated.h"

namespace kvjit::kvx {

// Rows per group of RowsInterleaved8.
inline constexpr int64_t kInterleavedRows = 8;

// How many rows `layout` interleaves: 1 for GGUF's rows back to back.
constexpr int64_t RowsInterleavedBy(WeightLayout layout) {
  return layout == WeightLayout::RowsInterleaved8 ? kInterleavedRows : 1;
}

// Whether an interleaved layout can hold `storage`: the 32-element block
// types the CPU kernels read interleaved. f32/f16/bf16 have no blocks, and
// the K-quants' 256-element super-blocks have no interleaved kernels.
constexpr bool HasInterleavableBlocks(StorageType storage) {
  switch (storage) {
    case StorageType::Q8_0:
    case StorageType::Q4_0:
    case StorageType::Q4_1:
    case StorageType::Q5_0:
    case StorageType::Q5_1: return true;
    default: return false;
  }
}

// Why a weight of `storage` and `shape` cannot be stored in `layout`, or an
// empty string where it can. Gguf holds anything.
inline std::string LayoutMismatch(WeightLayout layout, StorageType storage,
                                  const std::vector<int64_t>& shape) {
  if (layout == WeightLayout::Gguf) return "";
  if (layout != WeightLayout::RowsInterleaved8) {
    return "layout " + std::to_string(static_cast<int>(layout)) + " is unknown to this runtime";
  }
  const std::string name = EnumNameWeightLayout(layout);
  if (!HasInterleavableBlocks(storage)) {
    return name + " holds 32-element blocks of q8_0, q4_0, q4_1, q5_0 or q5_1, not " +
           EnumNameStorageType(storage);
  }
  if (shape.size() != 2) return name + " holds matrices, not a tensor of rank " + std::to_string(shape.size());
  if (shape[0] <= 0 || shape[0] % kInterleavedRows != 0) {
    return name + " needs a positive multiple of " + std::to_string(kInterleavedRows) + " rows, not " +
           std::to_string(shape[0]);
  }
  if (shape[1] <= 0 || shape[1] % 32 != 0) {
    return name + " needs whole 32-element blocks per row, not " + std::to_string(shape[1]) + " columns";
  }
  return "";
}

// `rows` rows of `blocks_per_row` blocks of `block_bytes` each, in GGUF's
// order (row after row), reordered into RowsInterleaved8: for each group of
// 8 rows, block b of the group's row r at (8 b + r) * block_bytes from the
// group's start. Blocks are copied whole: a block's bytes, scale included,
// are the GGUF block's. `rows` is a multiple of 8 (LayoutMismatch).
inline std::vector<uint8_t> InterleaveRows(const uint8_t* gguf, int64_t rows, int64_t blocks_per_row,
                                           uint64_t block_bytes) {
  std::vector<uint8_t> out(static_cast<size_t>(rows * blocks_per_row) * block_bytes);
  const uint64_t row_bytes = static_cast<uint64_t>(blocks_per_row) * block_bytes;
  for (int64_t row = 0; row < rows; ++row) {
    const int64_t group = row / kInterleavedRows;
    const int64_t r = row % kInterleavedRows;
    uint8_t* group_start = out.data() + static_cast<uint64_t>(group * kInterleavedRows) * row_bytes;
    for (int64_t b = 0; b < blocks_per_row; ++b) {
      std::memcpy(group_start + static_cast<uint64_t>(b * kInterleavedRows + r) * block_bytes,
                  gguf + static_cast<uint64_t>(row) * row_bytes + static_cast<uint64_t>(b) * block_bytes,
                  block_bytes);
    }
  }
  return out;
}

}  // namespace kvjit::kvx

#endif  // KVJIT_RUNTIME_SCHEMA_WEIGHTLAYOUT_H_
