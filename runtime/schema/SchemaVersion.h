#ifndef KVJIT_RUNTIME_SCHEMA_SCHEMAVERSION_H_
#define KVJIT_RUNTIME_SCHEMA_SCHEMAVERSION_H_

#include <cstdint>

namespace kvjit::kvx {

// Bumped on every change to kvx.fbs that an older runtime cannot read (7:
// runtimes refuse an elementwise step opcode they do not know, so a new one
// needs no bump).
inline constexpr uint32_t kSchemaVersion = 7;

}  // namespace kvjit::kvx

#endif  // KVJIT_RUNTIME_SCHEMA_SCHEMAVERSION_H_
