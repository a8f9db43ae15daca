#ifndef KVJIT_RUNTIME_SCHEMA_SCHEMAVERSION_H_
#define KVJIT_RUNTIME_SCHEMA_SCHEMAVERSION_H_

#include <cstdint>

namespace kvjit::kvx {

// Bumped on every change to kvx.fbs that an older runtime cannot read (7:
// runtimes refuse an elementwise step opcode they do not know, so a new one
// needs no bump; 8: KvAttentionParams.softcap, which a runtime of 7 would
// ignore).
inline constexpr uint32_t kSchemaVersion = 8;

}  // namespace kvjit::kvx

#endif  // KVJIT_RUNTIME_SCHEMA_SCHEMAVERSION_H_
