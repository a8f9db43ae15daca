#include "runtime/tokenizer/ByteLevelAlphabet.h"

#include "runtime/tokenizer/Utf8.h"

namespace kvjit::tokenizer {
namespace {

bool KeepsItsCodePoint(int byte) {
  return (byte >= '!' && byte <= '~') || (byte >= 0xA1 && byte <= 0xAC) ||
         (byte >= 0xAE && byte <= 0xFF);
}

}  // namespace

ByteLevelAlphabet::ByteLevelAlphabet() {
  byte_of_code_point_.fill(-1);
  uint32_t next_borrowed = 256;
  for (int byte = 0; byte < 256; ++byte) {
    const uint32_t code_point =
        KeepsItsCodePoint(byte) ? static_cast<uint32_t>(byte) : next_borrowed++;
    code_point_of_byte_[byte] = code_point;
    byte_of_code_point_[code_point] = static_cast<int16_t>(byte);
  }
}

std::string ByteLevelAlphabet::Encode(std::string_view bytes) const {
  std::string spelled;
  spelled.reserve(bytes.size() * 2);
  for (char byte : bytes) {
    AppendUtf8(code_point_of_byte_[static_cast<unsigned char>(byte)], &spelled);
  }
  return spelled;
}

std::string ByteLevelAlphabet::Decode(std::string_view spelled) const {
  std::string bytes;
  bytes.reserve(spelled.size());
  size_t offset = 0;
  while (offset < spelled.size()) {
    const auto lead = static_cast<unsigned char>(spelled[offset]);
    const size_t length = CharacterLengthAt(spelled, offset);
    uint32_t code_point = kCodePointLimit;
    if (length == 1 && lead < 0x80) {
      code_point = lead;
    } else if (length == 2) {
      code_point = ((lead & 0x1Fu) << 6) |
                   (static_cast<unsigned char>(spelled[offset + 1]) & 0x3Fu);
    }
    if (code_point < kCodePointLimit && byte_of_code_point_[code_point] >= 0) {
      bytes.push_back(static_cast<char>(byte_of_code_point_[code_point]));
    } else {
      bytes.append(spelled.substr(offset, length));
    }
    offset += length;
  }
  return bytes;
}

}  // namespace kvjit::tokenizer
