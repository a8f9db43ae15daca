#ifndef KVJIT_RUNTIME_TOKENIZER_UTF8_H
#define KVJIT_RUNTIME_TOKENIZER_UTF8_H

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace kvjit::tokenizer {

// The length of the UTF-8 sequence that `lead` starts; 1 for a byte that
// cannot start one, so that scanning always advances.
size_t Utf8SequenceLength(unsigned char lead);

// OK when `text` is well-formed UTF-8 (no overlong forms, surrogates or code
// points above U+10FFFF); otherwise an error naming the first bad byte offset.
absl::Status CheckUtf8(std::string_view text);

void AppendUtf8(uint32_t code_point, std::string* out);

// How many bytes at the end of `text` begin a UTF-8 sequence that the text
// cuts short: those bytes are waiting for the rest of their character.
size_t IncompleteUtf8SuffixLength(std::string_view text);

}  // namespace kvjit::tokenizer

#endif  // KVJIT_RUNTIME_TOKENIZER_UTF8_H
