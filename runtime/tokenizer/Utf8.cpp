#include "runtime/tokenizer/Utf8.h"

#include <algorithm>

#include <unicode/uchar.h>
#include <unicode/utf8.h>

#include "absl/strings/str_cat.h"

namespace kvjit::tokenizer {
namespace {

bool IsContinuationByte(unsigned char byte) { return (byte & 0xC0) == 0x80; }

// The length of the well-formed sequence at the start of `text`, or 0.
size_t WellFormedSequenceLength(std::string_view text) {
  const auto byte = [&](size_t i) {
    return static_cast<unsigned char>(text[i]);
  };
  const unsigned char lead = byte(0);
  if (lead < 0x80) return 1;
  const size_t length = Utf8SequenceLength(lead);
  if (length == 1 || text.size() < length) return 0;
  for (size_t i = 1; i < length; ++i) {
    if (!IsContinuationByte(byte(i))) return 0;
  }
  // The second byte's range rules out overlong forms, surrogates and code
  // points beyond U+10FFFF (RFC 3629, section 4).
  const unsigned char second = byte(1);
  if (lead == 0xE0 && second < 0xA0) return 0;
  if (lead == 0xED && second > 0x9F) return 0;
  if (lead == 0xF0 && second < 0x90) return 0;
  if (lead == 0xF4 && second > 0x8F) return 0;
  return length;
}

}  // namespace

size_t Utf8SequenceLength(unsigned char lead) {
  if (lead >= 0xC2 && lead <= 0xDF) return 2;
  if (lead >= 0xE0 && lead <= 0xEF) return 3;
  if (lead >= 0xF0 && lead <= 0xF4) return 4;
  return 1;
}

size_t CharacterLengthAt(std::string_view text, size_t at) {
  return std::min(Utf8SequenceLength(static_cast<unsigned char>(text[at])), text.size() - at);
}

size_t LeadingWhitespaceLength(std::string_view text) {
  const auto* bytes = reinterpret_cast<const uint8_t*>(text.data());
  const int32_t length = static_cast<int32_t>(text.size());
  int32_t start = 0;
  while (start < length) {
    int32_t next = start;
    UChar32 c;
    U8_NEXT(bytes, next, length, c);
    if (c < 0 || !u_isUWhiteSpace(c)) break;
    start = next;
  }
  return static_cast<size_t>(start);
}

size_t TrailingWhitespaceStart(std::string_view text) {
  const auto* bytes = reinterpret_cast<const uint8_t*>(text.data());
  int32_t end = static_cast<int32_t>(text.size());
  while (end > 0) {
    int32_t previous = end;
    UChar32 c;
    U8_PREV(bytes, 0, previous, c);
    if (c < 0 || !u_isUWhiteSpace(c)) break;
    end = previous;
  }
  return static_cast<size_t>(end);
}

absl::Status CheckUtf8(std::string_view text) {
  size_t offset = 0;
  while (offset < text.size()) {
    const size_t length = WellFormedSequenceLength(text.substr(offset));
    if (length == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "text is not valid UTF-8: bad byte 0x",
          absl::Hex(static_cast<unsigned char>(text[offset]), absl::kZeroPad2),
          " at offset ", offset));
    }
    offset += length;
  }
  return absl::OkStatus();
}

void AppendUtf8(uint32_t code_point, std::string* out) {
  if (code_point < 0x80) {
    out->push_back(static_cast<char>(code_point));
  } else if (code_point < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (code_point >> 6)));
    out->push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  } else if (code_point < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (code_point >> 12)));
    out->push_back(static_cast<char>(0x80 | ((code_point >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (code_point >> 18)));
    out->push_back(static_cast<char>(0x80 | ((code_point >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((code_point >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  }
}

size_t IncompleteUtf8SuffixLength(std::string_view text) {
  // A character is at most four bytes, so only the last three can be the
  // start of one that is still missing bytes.
  const size_t window = text.size() < 3 ? text.size() : 3;
  for (size_t back = 1; back <= window; ++back) {
    const auto byte = static_cast<unsigned char>(text[text.size() - back]);
    if (IsContinuationByte(byte)) continue;
    return Utf8SequenceLength(byte) > back ? back : 0;
  }
  return 0;
}

}  // namespace kvjit::tokenizer
