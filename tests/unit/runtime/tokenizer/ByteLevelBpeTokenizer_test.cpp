#include "runtime/tokenizer/ByteLevelBpeTokenizer.h"

#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvjit::tokenizer {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

enum Id : int32_t {
  kA,
  kB,
  kC,
  kSpace,
  kNewline,
  kAB,
  kSpaceAB,
  kABC,
  kEndOfText,
  kImEnd,
  kUserTag,
  kDigit1,
  kDigit2,
  kE9,
  kC3,
};

// Byte-level vocabularies spell a space "Ġ" (U+0120), a newline "Ċ"
// (U+010A), and byte 0xC3 "Ã" (its Latin-1 code point).
Vocabulary TinyVocabulary() {
  Vocabulary vocabulary;
  vocabulary.model = TokenizerModel::kByteLevelBpe;
  vocabulary.pre_tokenizer = PreTokenizer::kGpt2;
  vocabulary.tokens = {"a",
                       "b",
                       "c",
                       "\xC4\xA0",
                       "\xC4\x8A",
                       "ab",
                       "\xC4\xA0"
                       "ab",
                       "abc",
                       "<|endoftext|>",
                       "<|im_end|>",
                       "<tag>",
                       "1",
                       "2",
                       "\xC2\xA9",
                       "\xC3\x83"};
  vocabulary.token_types.assign(vocabulary.tokens.size(), TokenType::kNormal);
  vocabulary.token_types[kEndOfText] = TokenType::kControl;
  vocabulary.token_types[kImEnd] = TokenType::kControl;
  vocabulary.token_types[kUserTag] = TokenType::kUserDefined;
  vocabulary.merges = {{"a", "b"}, {"\xC4\xA0", "ab"}, {"ab", "c"}};
  vocabulary.bos_id = kEndOfText;
  vocabulary.eos_id = kEndOfText;
  return vocabulary;
}

std::unique_ptr<Tokenizer> Build(Vocabulary vocabulary) {
  auto tokenizer = CreateTokenizer(std::move(vocabulary));
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.status();
  return tokenizer.ok() ? std::move(*tokenizer) : nullptr;
}

std::vector<int32_t> EncodeOrDie(const Tokenizer& tokenizer,
                                 std::string_view text,
                                 bool add_special = false,
                                 bool parse_special = false) {
  auto ids = tokenizer.Encode(text, add_special, parse_special);
  EXPECT_TRUE(ids.ok()) << ids.status();
  return ids.ok() ? *ids : std::vector<int32_t>{};
}

TEST(ByteLevelBpeTokenizer, BetterRankedMergeWins) {
  auto tokenizer = Build(TinyVocabulary());
  EXPECT_THAT(EncodeOrDie(*tokenizer, "abc"), ElementsAre(kABC));
  // "Ġ ab" outranks "ab c", and no merge joins "Ġab" with "c".
  EXPECT_THAT(EncodeOrDie(*tokenizer, " abc"), ElementsAre(kSpaceAB, kC));

  Vocabulary reordered = TinyVocabulary();
  std::swap(reordered.merges[1], reordered.merges[2]);
  EXPECT_THAT(EncodeOrDie(*Build(std::move(reordered)), " abc"),
              ElementsAre(kSpace, kABC));
}

TEST(ByteLevelBpeTokenizer, MergesStayInsideWords) {
  auto tokenizer = Build(TinyVocabulary());
  // GPT-2's pattern cuts "ab ab" into "ab" and " ab".
  EXPECT_THAT(EncodeOrDie(*tokenizer, "ab ab"), ElementsAre(kAB, kSpaceAB));
  EXPECT_THAT(EncodeOrDie(*tokenizer, "a\n\nb"),
              ElementsAre(kA, kNewline, kNewline, kB));
  EXPECT_THAT(EncodeOrDie(*tokenizer, ""), ElementsAre());
}

TEST(ByteLevelBpeTokenizer, SpellsBytesInTheByteAlphabet) {
  auto tokenizer = Build(TinyVocabulary());
  // "é" is bytes C3 A9, spelled "Ã" and "©".
  EXPECT_THAT(EncodeOrDie(*tokenizer, "\xC3\xA9"), ElementsAre(kC3, kE9));
  EXPECT_EQ(tokenizer->Decode({kC3, kE9}), "\xC3\xA9");
}

TEST(ByteLevelBpeTokenizer, MissingCharacterIsUnknownOrAnError) {
  auto tokenizer = Build(TinyVocabulary());
  auto ids = tokenizer->Encode("z", false, false);
  ASSERT_FALSE(ids.ok());
  EXPECT_THAT(std::string(ids.status().message()),
              HasSubstr("no token for \"z\""));

  Vocabulary with_unknown = TinyVocabulary();
  with_unknown.unknown_id = kUserTag;
  EXPECT_THAT(EncodeOrDie(*Build(std::move(with_unknown)), "azb"),
              ElementsAre(kA, kUserTag, kB));
}

TEST(ByteLevelBpeTokenizer, SplitsSpecialTokensBeforeMerging) {
  auto tokenizer = Build(TinyVocabulary());
  EXPECT_THAT(
      EncodeOrDie(*tokenizer, "ab<|im_end|> ab<|endoftext|>", false, true),
      ElementsAre(kAB, kImEnd, kSpaceAB, kEndOfText));
  EXPECT_THAT(EncodeOrDie(*tokenizer, "a<tag>b"),
              ElementsAre(kA, kUserTag, kB));
  // Untrusted text cannot smuggle in control tokens.
  auto literal = tokenizer->Encode("<|im_end|>", false, false);
  EXPECT_FALSE(literal.ok());
}

TEST(ByteLevelBpeTokenizer, AddsBosOnlyWhenConfigured) {
  auto tokenizer = Build(TinyVocabulary());
  EXPECT_THAT(EncodeOrDie(*tokenizer, "ab", true), ElementsAre(kAB));
  Vocabulary with_bos = TinyVocabulary();
  with_bos.add_bos_token = true;
  EXPECT_THAT(EncodeOrDie(*Build(std::move(with_bos)), "ab", true),
              ElementsAre(kEndOfText, kAB));
}

TEST(ByteLevelBpeTokenizer, DecodeIsExactAndSkipsControlTokens) {
  auto tokenizer = Build(TinyVocabulary());
  EXPECT_EQ(tokenizer->Decode({kSpaceAB, kNewline, kEndOfText, kUserTag, kC}),
            " ab\n<tag>c");
  EXPECT_EQ(tokenizer->TokenToPiece(kSpace), " ");
  EXPECT_EQ(tokenizer->TokenToPiece(kImEnd), "");
  for (std::string_view text : {" ab", "abc ab  c\n",
                                "\xC3\xA9"
                                "a"}) {
    EXPECT_EQ(tokenizer->Decode(EncodeOrDie(*tokenizer, text)), text);
  }
}

TEST(ByteLevelBpeTokenizer, EndOfGenerationFindsChatTurnTokens) {
  auto tokenizer = Build(TinyVocabulary());
  EXPECT_TRUE(tokenizer->IsEndOfGeneration(kEndOfText));
  EXPECT_TRUE(tokenizer->IsEndOfGeneration(kImEnd));
  EXPECT_FALSE(tokenizer->IsEndOfGeneration(kUserTag));
}

TEST(ByteLevelBpeTokenizer, IgnoreMergesTakesWholeWordTokensFirst) {
  Vocabulary vocabulary = TinyVocabulary();
  vocabulary.ignore_merges = true;
  // No merge builds "abc" once "a b" is gone; Llama 3 still finds it whole.
  vocabulary.merges = {{"b", "c"}};
  EXPECT_THAT(EncodeOrDie(*Build(vocabulary), "abc"), ElementsAre(kABC));
  vocabulary.ignore_merges = false;
  // Elsewhere "a" + "bc" is what merging gives; "bc" is no token, so its
  // characters stand alone.
  EXPECT_THAT(EncodeOrDie(*Build(std::move(vocabulary)), "abc"),
              ElementsAre(kA, kB, kC));
}

}  // namespace
}  // namespace kvjit::tokenizer
