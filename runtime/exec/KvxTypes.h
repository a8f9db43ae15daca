#ifndef KVJIT_RUNTIME_EXEC_KVXTYPES_H_
#define KVJIT_RUNTIME_EXEC_KVXTYPES_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "runtime/quant/StorageType.h"
#include "runtime/schema/kvx_generated.h"

// The executable's encodings shared by its writer (codegen) and its readers.
namespace kvjit::runtime {

kvx::StorageType ToKvxStorage(quant::StorageType storage);
absl::StatusOr<quant::StorageType> FromKvxStorage(kvx::StorageType storage);

// 64-bit FNV-1a: the checksum of a weight's bytes, written by the compiler
// and checked when the executable is loaded.
uint64_t Fnv1a64(absl::Span<const uint8_t> bytes);

}  // namespace kvjit::runtime

#endif  // KVJIT_RUNTIME_EXEC_KVXTYPES_H_
