// What the tokenizer fuzzers do with a vocabulary a reader accepted: build
// the tokenizer, carry the vocabulary through an executable's Tokenizer table
// and back, and run both over fixed texts and id lists. A vocabulary that
// builds must encode and decode without crashing, give only ids inside the
// vocabulary, and encode and decode the same after the trip through the
// executable (__builtin_trap otherwise, so that libFuzzer keeps the input).
// With KVJIT_FUZZ_VERBOSE set, why an input went no further is printed, for
// checking seeds and triage.

#ifndef KVJIT_TESTS_FUZZ_TOKENIZERFUZZCOMMON_H_
#define KVJIT_TESTS_FUZZ_TOKENIZERFUZZCOMMON_H_

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "flatbuffers/flatbuffers.h"
#include "runtime/tokenizer/ExecutableTokenizer.h"
#include "runtime/tokenizer/StreamingDecoder.h"
#include "runtime/tokenizer/Tokenizer.h"
#include "runtime/tokenizer/Vocabulary.h"

namespace kvjit::fuzz {

// Accumulates what was read so that the work cannot be optimized away.
inline volatile uint64_t tokenizer_sink;

// Valid UTF-8 only: Encode refuses anything else before the tokenizers see it.
inline constexpr std::string_view kTexts[] = {
    "",
    "Hello, world! It's 2024: 3.14159 and x=42.",
    " ",
    "  two  spaces,\ttab\nnewline\r\n\n   ",
    "<s>",
    "<s> text </s><unk><pad><|endoftext|><|im_start|>user\n<|im_end|>",
    "\xF0\x9F\x98\x80\xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD \xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9",  // emoji, ZWJ
    "\xD0\x9F\xD1\x80\xD0\xB8\xD0\xB2\xD0\xB5\xD1\x82 \xE4\xB8\x96\xE7\x95\x8C "  // Cyrillic, CJK
    "\xD9\x85\xD8\xB1\xD8\xAD\xD8\xA8\xD8\xA7 \xE0\xA4\xA8\xE0\xA4\xAE\xE0\xA4\xB8\xE0\xA5\x8D\xE0\xA4\xA4\xE0\xA5\x87 "  // Arabic, Devanagari
    "\xCE\x93\xCE\xB5\xCE\xB9\xCE\xB1 \xED\x95\x9C\xEA\xB5\xAD\xEC\x96\xB4 \xE3\x81\x93\xE3\x82\x93",  // Greek, Hangul, kana
    "e\xCC\x81 \xC3\xA9 \xEF\xAC\x81 \xE2\x85\xA0 \xEF\xBC\xA1 \xE2\x96\x81\xE2\x96\x81x",  // NFD/NFC, ligature, U+2581
    "\xEF\xBF\xBD\xEF\xBB\xBF\xC2\xA0\xE2\x80\x83\xF4\x8F\xBF\xBF",  // U+FFFD, BOM, NBSP, em space, U+10FFFF
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
    "1234567890123456789012345678901234567890 !!!!!!!!!!!!!!!!!!!!!!!!!!!!",
};

// Notes why an input went no further (printed with KVJIT_FUZZ_VERBOSE).
inline void Refused(const absl::Status& status) {
  static const bool verbose = std::getenv("KVJIT_FUZZ_VERBOSE") != nullptr;
  if (verbose) std::fprintf(stderr, "refused: %s\n", status.ToString().c_str());
  tokenizer_sink = tokenizer_sink + status.message().size();
}

// Traps, after naming what failed, unless `condition` holds.
#define KVJIT_FUZZ_CHECK(condition)                                              \
  do {                                                                           \
    if (!(condition)) {                                                          \
      std::fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #condition); \
      __builtin_trap();                                                          \
    }                                                                            \
  } while (false)

// Encodes every text both ways; the ids each gives, for Decode.
inline std::vector<std::vector<int32_t>> EncodeAll(const tokenizer::Tokenizer& tokenizer) {
  std::vector<std::vector<int32_t>> encoded;
  for (std::string_view text : kTexts) {
    for (bool parse_special : {false, true}) {
      for (bool add_special : {false, true}) {
        absl::StatusOr<std::vector<int32_t>> ids =
            tokenizer.Encode(text, add_special, parse_special);
        if (!ids.ok()) {
          Refused(ids.status());
          encoded.emplace_back();
          continue;
        }
        for (int32_t id : *ids) KVJIT_FUZZ_CHECK(id >= 0 && id < tokenizer.vocab_size());
        encoded.push_back(*std::move(ids));
      }
    }
  }
  return encoded;
}

// Decodes what EncodeAll gave, every id up to 512, and ids outside the
// vocabulary, through Decode and a StreamingDecoder.
inline std::vector<std::string> DecodeAll(const tokenizer::Tokenizer& tokenizer,
                                          const std::vector<std::vector<int32_t>>& encoded) {
  std::vector<std::vector<int32_t>> lists = encoded;
  const int32_t size = tokenizer.vocab_size();
  std::vector<int32_t> all;
  for (int32_t id = 0; id < size && id < 512; ++id) all.push_back(id);
  lists.push_back(std::move(all));
  lists.push_back({-1, size, size + 1, std::numeric_limits<int32_t>::max(),
                   std::numeric_limits<int32_t>::min(), 0, tokenizer::kNoToken});
  lists.push_back({tokenizer.bos_id(), tokenizer.eos_id(), 0, size - 1, tokenizer.bos_id()});
  std::vector<std::string> decoded;
  for (const std::vector<int32_t>& ids : lists) {
    decoded.push_back(tokenizer.Decode(ids));
    tokenizer::StreamingDecoder stream(tokenizer);
    std::string streamed;
    for (int32_t id : ids) streamed += stream.Push(id);
    streamed += stream.Flush();
    decoded.push_back(std::move(streamed));
    for (int32_t id : ids) tokenizer_sink = tokenizer_sink + tokenizer.IsEndOfGeneration(id);
  }
  return decoded;
}

// Builds the tokenizer of `vocabulary` and exercises it and its copy through
// an executable.
inline void ExerciseVocabulary(tokenizer::Vocabulary vocabulary) {
  absl::StatusOr<std::unique_ptr<tokenizer::Tokenizer>> built =
      tokenizer::CreateTokenizer(vocabulary);
  if (!built.ok()) {
    Refused(built.status());
    return;
  }
  static const bool verbose = std::getenv("KVJIT_FUZZ_VERBOSE") != nullptr;
  if (verbose) std::fprintf(stderr, "built: %d tokens\n", (*built)->vocab_size());
  const std::vector<std::vector<int32_t>> encoded = EncodeAll(**built);
  const std::vector<std::string> decoded = DecodeAll(**built, encoded);

  flatbuffers::FlatBufferBuilder builder;
  builder.Finish(tokenizer::WriteTokenizerTable(builder, vocabulary, ""));
  const auto* table = flatbuffers::GetRoot<kvx::Tokenizer>(builder.GetBufferPointer());
  absl::StatusOr<tokenizer::Vocabulary> read = tokenizer::VocabularyFromTable(*table);
  // The table was written from a vocabulary that builds.
  if (!read.ok()) std::fprintf(stderr, "%s\n", read.status().ToString().c_str());
  KVJIT_FUZZ_CHECK(read.ok());
  absl::StatusOr<std::unique_ptr<tokenizer::Tokenizer>> rebuilt =
      tokenizer::CreateTokenizer(*std::move(read));
  if (!rebuilt.ok()) std::fprintf(stderr, "%s\n", rebuilt.status().ToString().c_str());
  KVJIT_FUZZ_CHECK(rebuilt.ok());
  KVJIT_FUZZ_CHECK(EncodeAll(**rebuilt) == encoded);
  KVJIT_FUZZ_CHECK(DecodeAll(**rebuilt, encoded) == decoded);
}

}  // namespace kvjit::fuzz

#endif  // KVJIT_TESTS_FUZZ_TOKENIZERFUZZCOMMON_H_
