#ifndef KVJIT_RUNTIME_TOKENIZER_BYTELEVELALPHABET_H
#define KVJIT_RUNTIME_TOKENIZER_BYTELEVELALPHABET_H

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace kvjit::tokenizer {

// GPT-2's reversible mapping of the 256 byte values onto printable
// characters, which byte-level BPE vocabularies spell their tokens in: bytes
// that are printable Latin-1 keep their code point, the others take code
// points from U+0100 on, in byte order (so a space is "Ġ", U+0120).
class ByteLevelAlphabet {
 public:
  ByteLevelAlphabet();

  // Spells `bytes` in the alphabet, as UTF-8.
  std::string Encode(std::string_view bytes) const;

  // Reverses Encode. Characters outside the alphabet are kept as they are.
  std::string Decode(std::string_view spelled) const;

 private:
  static constexpr uint32_t kCodePointLimit = 256 + 68;
  std::array<uint32_t, 256> code_point_of_byte_;
  // The byte each code point below kCodePointLimit stands for, or -1.
  std::array<int16_t, kCodePointLimit> byte_of_code_point_;
};

}  // namespace kvjit::tokenizer

#endif  // KVJIT_RUNTIME_TOKENIZER_BYTELEVELALPHABET_H
