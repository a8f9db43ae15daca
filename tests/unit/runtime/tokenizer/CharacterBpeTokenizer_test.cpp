// CharacterBpeTokenizer on small hand-made vocabularies: the rules the
// tokenizers-conformance corpus (frontend/tokenizer's
// SentencePieceTokenizerJson_test) exercises only in bulk, one at a time.

#include "runtime/tokenizer/CharacterBpeTokenizer.h"

#include <memory>
#include <string>
#include <vector>

#include "flatbuffers/flatbuffers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/tokenizer/ExecutableTokenizer.h"
#include "runtime/tokenizer/StreamingDecoder.h"

namespace kvjit::tokenizer {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

constexpr char kMeta[] = "\xE2\x96\x81";  // U+2581

// Llama 2's legacy pipeline over a vocabulary of "a", "b", "▁", "ab", "▁ab",
// the bytes of "é" (C3 A9), <unk>, <s> and a user token <u>.
Vocabulary LegacyVocabulary() {
  Vocabulary vocabulary;
  vocabulary.model = TokenizerModel::kCharacterBpe;
  vocabulary.tokens = {"<unk>", "<s>", "a", "b", kMeta, "ab", std::string(kMeta) + "ab",
                       "<0xC3>", "<0xA9>", "<u>"};
  vocabulary.token_types = {TokenType::kControl, TokenType::kControl, TokenType::kNormal,
                            TokenType::kNormal,  TokenType::kNormal,  TokenType::kNormal,
                            TokenType::kNormal,  TokenType::kNormal,  TokenType::kNormal,
                            TokenType::kUserDefined};
  vocabulary.merges = {{"a", "b"}, {kMeta, "ab"}};
  vocabulary.unknown_id = 0;
  vocabulary.bos_id = 1;
  vocabulary.add_bos_token = true;
  vocabulary.byte_fallback = true;
  vocabulary.fuse_unk = true;
  vocabulary.normalizer = {NormalizerStep{NormalizerKind::kPrepend, "", false, kMeta},
                           NormalizerStep{NormalizerKind::kReplace, " ", false, kMeta}};
  vocabulary.decoder = {DecoderStep{DecoderKind::kReplace, kMeta, " "},
                        DecoderStep{DecoderKind::kByteFallback}, DecoderStep{DecoderKind::kFuse},
                        DecoderStep{DecoderKind::kStrip, "", " ", 1, 0}};
  return vocabulary;
}

std::unique_ptr<Tokenizer> Create(Vocabulary vocabulary) {
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer = CreateTokenizer(std::move(vocabulary));
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.status();
  return tokenizer.ok() ? *std::move(tokenizer) : nullptr;
}

// `vocabulary` written as an executable's Tokenizer table and read back.
absl::StatusOr<Vocabulary> ThroughTable(const Vocabulary& vocabulary) {
  flatbuffers::FlatBufferBuilder builder;
  builder.Finish(WriteTokenizerTable(builder, vocabulary, ""));
  return VocabularyFromTable(*flatbuffers::GetRoot<kvx::Tokenizer>(builder.GetBufferPointer()));
}

std::vector<int32_t> Encode(const Tokenizer& tokenizer, const std::string& text) {
  absl::StatusOr<std::vector<int32_t>> ids = tokenizer.Encode(text, false, true);
  EXPECT_TRUE(ids.ok()) << ids.status();
  return ids.ok() ? *ids : std::vector<int32_t>{};
}

TEST(CharacterBpeTokenizer, MergesByRankAndFallsBackToBytes) {
  auto tokenizer = Create(LegacyVocabulary());
  // "▁ab": a+b (rank 0) first, then ▁+ab (rank 1).
  EXPECT_THAT(Encode(*tokenizer, "ab"), ElementsAre(6));
  // é is not a token: its two bytes.
  EXPECT_THAT(Encode(*tokenizer, "é"), ElementsAre(4, 7, 8));
  // Prepend applies to every stretch between added tokens.
  EXPECT_THAT(Encode(*tokenizer, "ab<u>ab"), ElementsAre(6, 9, 6));
}

TEST(CharacterBpeTokenizer, FusesUnknownCharactersWithoutByteTokens) {
  Vocabulary vocabulary = LegacyVocabulary();
  vocabulary.byte_fallback = false;
  auto fused = Create(vocabulary);
  EXPECT_THAT(Encode(*fused, "éé"), ElementsAre(4, 0));
  vocabulary.fuse_unk = false;
  auto unfused = Create(vocabulary);
  EXPECT_THAT(Encode(*unfused, "éé"), ElementsAre(4, 0, 0));
  vocabulary.unknown_id = kNoToken;
  auto without_unknown = Create(vocabulary);
  absl::StatusOr<std::vector<int32_t>> ids = without_unknown->Encode("é", false, true);
  EXPECT_THAT(ids.status().message(), HasSubstr("neither byte tokens nor an unknown token"));
}

TEST(CharacterBpeTokenizer, DecodesThroughTheDecoderSteps) {
  auto tokenizer = Create(LegacyVocabulary());
  // Control tokens are left out; Strip takes the one space the prefix left.
  EXPECT_EQ(tokenizer->Decode({1, 6, 6, 7, 8}), "ab abé");
  // Bytes that are not UTF-8 become U+FFFD each.
  EXPECT_EQ(tokenizer->Decode({6, 7, 7}), "ab\xEF\xBF\xBD\xEF\xBF\xBD");
}

TEST(CharacterBpeTokenizer, StreamsAsAContinuation) {
  auto tokenizer = Create(LegacyVocabulary());
  StreamingDecoder decoder(*tokenizer);
  // The space Strip would take at the text's start stays: the stream
  // continues a prompt. A character over two byte tokens waits for both.
  EXPECT_EQ(decoder.Push(6), " ab");
  EXPECT_EQ(decoder.Push(7), "");
  EXPECT_EQ(decoder.Push(8), "é");
}

TEST(CharacterBpeTokenizer, MetaspaceDropsReplacementsInTheFirstTokenOnly) {
  Vocabulary vocabulary = LegacyVocabulary();
  vocabulary.normalizer.clear();
  vocabulary.metaspace = Metaspace{kMeta, PrependScheme::kFirst, /*split=*/true};
  vocabulary.decoder = {DecoderStep{DecoderKind::kMetaspace, kMeta, "", 0, 0, PrependScheme::kFirst}};
  auto tokenizer = Create(vocabulary);
  // "first": the prefix before the input's start only, not after <u>.
  EXPECT_THAT(Encode(*tokenizer, "ab<u>ab ab"), ElementsAre(6, 9, 5, 6));
  EXPECT_EQ(tokenizer->Decode({6, 6}), "ab ab");
}

TEST(CharacterBpeTokenizer, RefusesANormalizerRegexThatDoesNotCompile) {
  Vocabulary vocabulary = LegacyVocabulary();
  vocabulary.normalizer.push_back(NormalizerStep{NormalizerKind::kReplace, "(", true, ""});
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer = CreateTokenizer(vocabulary);
  EXPECT_THAT(tokenizer.status().message(),
              HasSubstr("the Replace normalizer's regex '(' does not compile"));
}

TEST(CharacterBpeTokenizer, AddedTokenOptionsTakeWhitespaceAndWholeWords) {
  Vocabulary vocabulary = LegacyVocabulary();
  vocabulary.tokens.push_back("<l>");
  vocabulary.token_types.push_back(TokenType::kControl);
  vocabulary.tokens.push_back("b");
  vocabulary.token_types.push_back(TokenType::kUserDefined);
  // <l> takes the whitespace on both sides; the added "b" (id 11) only where
  // no word character touches it.
  vocabulary.added_token_options = {AddedTokenOptions{10, true, true, false, false},
                                    AddedTokenOptions{11, false, false, true, false}};
  auto tokenizer = Create(vocabulary);
  EXPECT_THAT(Encode(*tokenizer, "ab  <l>  ab"), ElementsAre(6, 10, 6));
  EXPECT_THAT(Encode(*tokenizer, "a b"), ElementsAre(4, 2, 4, 11));
}

// Caught by tests/fuzz/tokenizer_json_fuzzer's trip through an executable:
// the table took these strings as C strings, so a tokenizer.json's "\u0000"
// cut them short.
TEST(CharacterBpeTokenizer, KeepsStringsWithNulThroughAnExecutable) {
  using namespace std::string_literals;
  Vocabulary vocabulary = LegacyVocabulary();
  vocabulary.normalizer.push_back(
      NormalizerStep{NormalizerKind::kReplace, "a\0b"s, false, "c\0"s});
  vocabulary.split_rules = std::vector<SplitRule>{SplitRule{"\0a"s, true}};
  vocabulary.metaspace = Metaspace{"\0"s, PrependScheme::kAlways, true};
  vocabulary.decoder.push_back(DecoderStep{DecoderKind::kReplace, "a\0"s, "\0b"s});
  absl::StatusOr<Vocabulary> read = ThroughTable(vocabulary);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->normalizer, vocabulary.normalizer);
  EXPECT_EQ(read->split_rules, vocabulary.split_rules);
  ASSERT_TRUE(read->metaspace.has_value());
  EXPECT_EQ(read->metaspace->replacement, "\0"s);
  ASSERT_EQ(read->decoder.size(), vocabulary.decoder.size());
  EXPECT_EQ(read->decoder.back().pattern, "a\0"s);
  EXPECT_EQ(read->decoder.back().content, "\0b"s);
}

// Caught by tests/fuzz/tokenizer_json_fuzzer's trip through an executable:
// merges travelled as "left right", and a piece of tokenizer.json's
// ["left", "right"] form may hold a space; they now travel as pairs.
TEST(CharacterBpeTokenizer, KeepsMergesOfPiecesWithSpacesThroughAnExecutable) {
  Vocabulary vocabulary;
  vocabulary.model = TokenizerModel::kCharacterBpe;
  vocabulary.tokens = {"<unk>", "a", " ", "b", "a ", "a b"};
  vocabulary.token_types.assign(vocabulary.tokens.size(), TokenType::kNormal);
  vocabulary.token_types[0] = TokenType::kUnknown;
  vocabulary.unknown_id = 0;
  vocabulary.merges = {{"a", " "}, {"a ", "b"}};
  absl::StatusOr<Vocabulary> read = ThroughTable(vocabulary);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_THAT(read->merges, ElementsAre(Pair("a", " "), Pair("a ", "b")));
  auto tokenizer = Create(*std::move(read));
  ASSERT_NE(tokenizer, nullptr);
  EXPECT_THAT(Encode(*tokenizer, "a b"), ElementsAre(5));
}

TEST(CharacterBpeTokenizer, KeepsAMergeThatSpacesWouldSplitTwoWays) {
  Vocabulary vocabulary;
  vocabulary.model = TokenizerModel::kCharacterBpe;
  // "a b c" is ("a", "b c") joined as "ab c", or ("a b", "c") as "a bc".
  vocabulary.tokens = {"a", "b c", "ab c", "a b", "c", "a bc"};
  vocabulary.token_types.assign(vocabulary.tokens.size(), TokenType::kNormal);
  vocabulary.merges = {{"a", "b c"}, {"a b", "c"}};
  absl::StatusOr<Vocabulary> read = ThroughTable(vocabulary);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_THAT(read->merges, ElementsAre(Pair("a", "b c"), Pair("a b", "c")));
}

}  // namespace
}  // namespace kvjit::tokenizer
