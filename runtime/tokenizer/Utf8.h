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

// The bytes of the character that starts at `at` in `text`, by its lead
// byte, cut short at the text's end.
size_t CharacterLengthAt(std::string_view text, size_t at);

// How many bytes of Unicode whitespace (White_Space: Rust's
// char::is_whitespace, which tokenizers' Strip and lstrip/rstrip use) start
// `text`, and where the whitespace that ends it starts.
size_t LeadingWhitespaceLength(std::string_view text);
size_t TrailingWhitespaceStart(std::string_view text);

// OK when `text` is well-formed UTF-8 (no overlong forms, surrogates or code
// points above U+10FFFF); otherwise an error naming the first bad byte offset.
absl::Status CheckUtf8(std::string_view text);

void AppendUtf8(uint32_t code_point, std::string* out);

// How many bytes at the end of `text` begin a UTF-8 sequence that the text
// cuts short: those bytes are waiting for the rest of their character.
size_t IncompleteUtf8SuffixLength(std::string_view text);

}  // namespace kvjit::tokenizer

#endif  // KVJIT_RUNTIME_TOKENIZER_UTF8_H
