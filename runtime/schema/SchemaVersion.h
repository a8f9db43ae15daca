#ifndef KVJIT_RUNTIME_SCHEMA_SCHEMAVERSION_H_
#define KVJIT_RUNTIME_SCHEMA_SCHEMAVERSION_H_

#include <cstdint>

namespace kvjit::kvx {

// Bumped on every change to kvx.fbs that an older runtime cannot read.
inline constexpr uint32_t kSchemaVersion = 6;

}  // namespace kvjit::kvx

#endif  // KVJIT_RUNTIME_SCHEMA_SCHEMAVERSION_H_
