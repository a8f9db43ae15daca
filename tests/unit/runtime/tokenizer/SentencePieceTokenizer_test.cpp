#include "runtime/tokenizer/SentencePieceTokenizer.h"

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/tokenizer/ExecutableTokenizer.h"

namespace kvjit::tokenizer {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

enum Id : int32_t {
  kUnk,
  kBos,
  kEos,
  kByteC3,
  kByteA9,
  kSpace,
  kA,
  kB,
  kC,
  kAB,
  kBC,
  kSpaceA,
  kSep,
  kImStart,
};

// "▁" is U+2581, SentencePiece's stand-in for a space.
Vocabulary TinyVocabulary() {
  Vocabulary vocabulary;
  vocabulary.model = TokenizerModel::kSentencePiece;
  vocabulary.tokens = {"<unk>",
                       "<s>",
                       "</s>",
                       "<0xC3>",
                       "<0xA9>",
                       "\xE2\x96\x81",
                       "a",
                       "b",
                       "c",
                       "ab",
                       "bc",
                       "\xE2\x96\x81"
                       "a",
                       "<sep>",
                       "<|im_start|>"};
  vocabulary.token_types = {
      TokenType::kUnknown,     TokenType::kControl, TokenType::kControl,
      TokenType::kByte,        TokenType::kByte,    TokenType::kNormal,
      TokenType::kNormal,      TokenType::kNormal,  TokenType::kNormal,
      TokenType::kNormal,      TokenType::kNormal,  TokenType::kNormal,
      TokenType::kUserDefined, TokenType::kControl};
  vocabulary.scores = {0, 0, 0, 0, 0, -10, -10, -10, -10, -1, -2, -3, 0, 0};
  vocabulary.bos_id = kBos;
  vocabulary.eos_id = kEos;
  vocabulary.unknown_id = kUnk;
  vocabulary.add_bos_token = true;
  vocabulary.add_space_prefix = true;
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

TEST(SentencePieceTokenizer, HigherScoringPairMergesFirst) {
  auto tokenizer = Build(TinyVocabulary());
  // "ab" (-1) beats "bc" (-2), and "abc" is no piece, so "c" stays alone.
  EXPECT_THAT(EncodeOrDie(*tokenizer, "abc"), ElementsAre(kSpace, kAB, kC));

  Vocabulary reversed = TinyVocabulary();
  reversed.scores[kBC] = -0.5f;
  auto reversed_tokenizer = Build(std::move(reversed));
  EXPECT_THAT(EncodeOrDie(*reversed_tokenizer, "abc"),
              ElementsAre(kSpaceA, kBC));
}

TEST(SentencePieceTokenizer, SpacesBecomeMarkersAndTextGetsOnePrefix) {
  auto tokenizer = Build(TinyVocabulary());
  EXPECT_THAT(EncodeOrDie(*tokenizer, "a a"), ElementsAre(kSpaceA, kSpaceA));
  EXPECT_THAT(EncodeOrDie(*tokenizer, ""), ElementsAre());

  Vocabulary no_prefix = TinyVocabulary();
  no_prefix.add_space_prefix = false;
  EXPECT_THAT(EncodeOrDie(*Build(std::move(no_prefix)), "a a"),
              ElementsAre(kA, kSpaceA));
}

TEST(SentencePieceTokenizer, AddsBosOnlyWhenAskedAndConfigured) {
  auto tokenizer = Build(TinyVocabulary());
  EXPECT_THAT(EncodeOrDie(*tokenizer, "a", /*add_special=*/true),
              ElementsAre(kBos, kSpaceA));
  EXPECT_THAT(EncodeOrDie(*tokenizer, "", /*add_special=*/true),
              ElementsAre(kBos));

  Vocabulary with_eos = TinyVocabulary();
  with_eos.add_bos_token = false;
  with_eos.add_eos_token = true;
  EXPECT_THAT(EncodeOrDie(*Build(std::move(with_eos)), "a", true),
              ElementsAre(kSpaceA, kEos));
}

TEST(SentencePieceTokenizer, UncoveredCharactersFallBackToBytes) {
  auto tokenizer = Build(TinyVocabulary());
  EXPECT_THAT(EncodeOrDie(*tokenizer, "\xC3\xA9"),  // é
              ElementsAre(kSpace, kByteC3, kByteA9));
}

TEST(SentencePieceTokenizer, CharactersWithoutByteTokensBecomeUnknown) {
  auto tokenizer = Build(TinyVocabulary());
  EXPECT_THAT(EncodeOrDie(*tokenizer, "azb"), ElementsAre(kSpaceA, kUnk, kB));

  Vocabulary no_unknown = TinyVocabulary();
  no_unknown.unknown_id = kNoToken;
  auto strict = Build(std::move(no_unknown));
  auto ids = strict->Encode("z", false, false);
  ASSERT_FALSE(ids.ok());
  EXPECT_THAT(std::string(ids.status().message()), HasSubstr("\"z\""));
}

TEST(SentencePieceTokenizer, ControlTokensAreParsedOnlyWhenAsked) {
  auto tokenizer = Build(TinyVocabulary());
  // After a special token the text gets the space prefix again.
  EXPECT_THAT(EncodeOrDie(*tokenizer, "<|im_start|>a", false, true),
              ElementsAre(kImStart, kSpaceA));
  const std::vector<int32_t> literal = EncodeOrDie(*tokenizer, "<|im_start|>a");
  EXPECT_EQ(std::count(literal.begin(), literal.end(), kImStart), 0);
  EXPECT_EQ(literal.back(), kA);
}

TEST(SentencePieceTokenizer, UserDefinedTokensAreAlwaysSplitOut) {
  auto tokenizer = Build(TinyVocabulary());
  EXPECT_THAT(EncodeOrDie(*tokenizer, "a<sep>b"),
              ElementsAre(kSpaceA, kSep, kSpace, kB));
}

// llama.cpp prefixes every run of text that starts the input or follows a
// special token; SentencePiece itself (a tokenizer.model) prefixes the whole
// text once, before user-defined tokens are split out.
TEST(SentencePieceTokenizer, ThePrefixGoesOncePerTextOrOncePerRun) {
  Vocabulary per_run = TinyVocabulary();
  EXPECT_THAT(EncodeOrDie(*Build(per_run), "<sep> a"), ElementsAre(kSep, kSpace, kSpaceA));
  EXPECT_THAT(EncodeOrDie(*Build(per_run), "a<sep>a"), ElementsAre(kSpaceA, kSep, kSpaceA));
  Vocabulary once = TinyVocabulary();
  once.space_prefix_once = true;
  EXPECT_THAT(EncodeOrDie(*Build(once), "<sep> a"), ElementsAre(kSpace, kSep, kSpaceA));
  EXPECT_THAT(EncodeOrDie(*Build(once), "a<sep>a"), ElementsAre(kSpaceA, kSep, kA));
  EXPECT_THAT(EncodeOrDie(*Build(once), ""), ElementsAre());
  EXPECT_THAT(EncodeOrDie(*Build(once), "a", /*add_special=*/true), ElementsAre(kBos, kSpaceA));
  once.add_space_prefix = false;
  EXPECT_THAT(EncodeOrDie(*Build(once), "a<sep>a"), ElementsAre(kA, kSep, kA));
}

// The executable carries the choice (kvx Tokenizer.space_prefix_once).
TEST(SentencePieceTokenizer, AnExecutableCarriesWhereThePrefixGoes) {
  for (bool once : {false, true}) {
    Vocabulary vocabulary = TinyVocabulary();
    vocabulary.bos_id = kBos;
    vocabulary.eos_id = kEos;
    vocabulary.unknown_id = kUnk;
    vocabulary.add_bos_token = false;
    vocabulary.add_space_prefix = true;
    vocabulary.space_prefix_once = once;
    flatbuffers::FlatBufferBuilder builder;
    auto table = WriteTokenizerTable(builder, vocabulary, "");
    kvx::ExecutableBuilder executable(builder);
    executable.add_tokenizer(table);
    builder.Finish(executable.Finish());
    auto tokenizer = TokenizerFromExecutable(*kvx::GetExecutable(builder.GetBufferPointer()));
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
    EXPECT_EQ((*tokenizer)->vocabulary().space_prefix_once, once);
    EXPECT_THAT(EncodeOrDie(**tokenizer, "<sep> a"),
                once ? ElementsAre(kSpace, kSep, kSpaceA) : ElementsAre(kSep, kSpace, kSpaceA));
  }
}

TEST(SentencePieceTokenizer, DecodeDropsThePrefixSpaceAndControlTokens) {
  auto tokenizer = Build(TinyVocabulary());
  EXPECT_EQ(tokenizer->Decode({kBos, kSpace, kAB, kC, kSpaceA, kEos}), "abc a");
  EXPECT_EQ(tokenizer->Decode({kSpace, kSpaceA}), " a");
  EXPECT_EQ(tokenizer->Decode({kSpace, kByteC3, kByteA9}), "\xC3\xA9");
  EXPECT_EQ(tokenizer->Decode({kUnk, -1, 1000}), "");
  EXPECT_EQ(tokenizer->TokenToPiece(kSpaceA), " a");
  EXPECT_EQ(tokenizer->TokenToPiece(kSep), "<sep>");
  for (std::string_view text : {"a", " a b", "abc  c",
                                "\xC3\xA9"
                                "a",
                                ""}) {
    EXPECT_EQ(tokenizer->Decode(EncodeOrDie(*tokenizer, text, true)), text);
  }
}

TEST(SentencePieceTokenizer, RejectsInvalidUtf8) {
  auto tokenizer = Build(TinyVocabulary());
  auto ids = tokenizer->Encode("a\xC3", false, false);
  ASSERT_FALSE(ids.ok());
  EXPECT_THAT(std::string(ids.status().message()),
              HasSubstr("not valid UTF-8"));
}

TEST(SentencePieceTokenizer, RejectsMalformedByteTokens) {
  Vocabulary vocabulary = TinyVocabulary();
  vocabulary.tokens[kByteC3] = "<0xZZ>";
  auto tokenizer = CreateTokenizer(std::move(vocabulary));
  ASSERT_FALSE(tokenizer.ok());
  EXPECT_THAT(std::string(tokenizer.status().message()), HasSubstr("<0xZZ>"));
}

TEST(SentencePieceTokenizer, EndOfGenerationCoversEosAndEndOfTurn) {
  Vocabulary vocabulary = TinyVocabulary();
  vocabulary.end_of_turn_id = kSep;
  auto tokenizer = Build(std::move(vocabulary));
  EXPECT_TRUE(tokenizer->IsEndOfGeneration(kEos));
  EXPECT_TRUE(tokenizer->IsEndOfGeneration(kSep));
  EXPECT_FALSE(tokenizer->IsEndOfGeneration(kBos));
  EXPECT_EQ(tokenizer->bos_id(), kBos);
  EXPECT_EQ(tokenizer->eos_id(), kEos);
  EXPECT_EQ(tokenizer->vocab_size(), 14);
}

}  // namespace
}  // namespace kvjit::tokenizer
