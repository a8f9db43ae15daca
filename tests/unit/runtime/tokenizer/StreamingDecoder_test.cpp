#include "runtime/tokenizer/StreamingDecoder.h"

#include <memory>
#include <string>

#include "gtest/gtest.h"

namespace kvjit::tokenizer {
namespace {

enum Id : int32_t { kUnk, kByteF0, kByte9F, kByteA6, kByte99, kSpaceA, kEos };

// A SentencePiece vocabulary whose only way to write "🦙" (F0 9F A6 99) is
// four byte tokens.
std::unique_ptr<Tokenizer> ByteTokenizer() {
  Vocabulary vocabulary;
  vocabulary.model = TokenizerModel::kSentencePiece;
  vocabulary.tokens = {"<unk>",
                       "<0xF0>",
                       "<0x9F>",
                       "<0xA6>",
                       "<0x99>",
                       "\xE2\x96\x81"
                       "a",
                       "</s>"};
  vocabulary.token_types = {TokenType::kUnknown, TokenType::kByte,
                            TokenType::kByte,    TokenType::kByte,
                            TokenType::kByte,    TokenType::kNormal,
                            TokenType::kControl};
  vocabulary.unknown_id = kUnk;
  vocabulary.eos_id = kEos;
  vocabulary.add_space_prefix = true;
  auto tokenizer = CreateTokenizer(std::move(vocabulary));
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.status();
  return tokenizer.ok() ? std::move(*tokenizer) : nullptr;
}

TEST(StreamingDecoder, HoldsBackACharacterUntilItsLastByte) {
  auto tokenizer = ByteTokenizer();
  StreamingDecoder decoder(*tokenizer);
  EXPECT_EQ(decoder.Push(kSpaceA), " a");
  EXPECT_EQ(decoder.Push(kByteF0), "");
  EXPECT_EQ(decoder.Push(kByte9F), "");
  EXPECT_EQ(decoder.Push(kByteA6), "");
  EXPECT_EQ(decoder.Push(kByte99), "\xF0\x9F\xA6\x99");
  EXPECT_EQ(decoder.Push(kEos), "");
  EXPECT_EQ(decoder.Flush(), "");
}

TEST(StreamingDecoder, FlushReturnsACharacterCutShort) {
  auto tokenizer = ByteTokenizer();
  StreamingDecoder decoder(*tokenizer);
  EXPECT_EQ(decoder.Push(kByteF0), "");
  EXPECT_EQ(decoder.Push(kByte9F), "");
  EXPECT_EQ(decoder.Flush(), "\xF0\x9F");
  EXPECT_EQ(decoder.Push(kSpaceA), " a");
}

TEST(StreamingDecoder, MatchesDecodeOfTheWholeSequence) {
  auto tokenizer = ByteTokenizer();
  auto ids = tokenizer->Encode(
      "a\xF0\x9F\xA6\x99"
      " a",
      false, false);
  ASSERT_TRUE(ids.ok()) << ids.status();
  StreamingDecoder decoder(*tokenizer);
  std::string streamed;
  for (int32_t id : *ids) streamed += decoder.Push(id);
  streamed += decoder.Flush();
  // Decode drops the space SentencePiece put in front; streaming keeps it.
  EXPECT_EQ(streamed, " " + tokenizer->Decode(*ids));
}

}  // namespace
}  // namespace kvjit::tokenizer
