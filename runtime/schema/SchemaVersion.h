#ifndef KVJIT_RUNTIME_SCHEMA_SCHEMAVERSION_H_
#define KVJIT_RUNTIME_SCHEMA_SCHEMAVERSION_H_

#include <cstdint>

namespace kvjit::kvx {

// Bumped on every change to kvx.fbs that an older runtime cannot read (7:
// runtimes refuse an elementwise step opcode they do not know, so a new one
// needs no bump; 8: KvAttentionParams.softcap, which a runtime of 7 would
// ignore; 9: Weight.layout, whose interleaved bytes a runtime of 8 would
// read as GGUF rows; 10: Tokenizer's tokenizer.json pipeline (normalizer,
// split_rules, metaspace, decoder, added_token_options, the CharacterBpe
// kind), which a runtime of 9 would ignore and tokenize differently; 11:
// KvLayout's value_type, value_slot_stride_bytes and rotations, a cache a
// runtime of 10 would read as unrotated keys of one type).
inline constexpr uint32_t kSchemaVersion = 11;

}  // namespace kvjit::kvx

#endif  // KVJIT_RUNTIME_SCHEMA_SCHEMAVERSION_H_
