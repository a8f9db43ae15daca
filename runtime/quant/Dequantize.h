#ifndef KVJIT_RUNTIME_QUANT_DEQUANTIZE_H_
#define KVJIT_RUNTIME_QUANT_DEQUANTIZE_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "runtime/quant/StorageType.h"

namespace kvjit::quant {

// Expands `dst.size()` elements stored as `type` in `src` (ggml's block
// layouts, little-endian). `dst.size()` must be a whole number of blocks and
// `src` exactly as long as RowBytes(type, dst.size()); anything else is an
// InvalidArgument error and `dst` is left untouched.
absl::Status DequantizeRow(StorageType type, absl::Span<const uint8_t> src, absl::Span<float> dst);

// As DequantizeRow, writing binary16 bit patterns (rounded to nearest even).
absl::Status DequantizeRowToF16(StorageType type, absl::Span<const uint8_t> src, absl::Span<uint16_t> dst);

}  // namespace kvjit::quant

#endif  // KVJIT_RUNTIME_QUANT_DEQUANTIZE_H_
