#include "runtime/tokenizer/WordSplitter.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvjit::tokenizer {
namespace {

using ::testing::ElementsAre;

std::vector<std::string> Split(PreTokenizer pre_tokenizer,
                               std::string_view text) {
  auto splitter = WordSplitter::Create(pre_tokenizer);
  EXPECT_TRUE(splitter.ok()) << splitter.status();
  if (!splitter.ok()) return {};
  auto words = (*splitter)->Split(text);
  EXPECT_TRUE(words.ok()) << words.status();
  if (!words.ok()) return {};
  return std::vector<std::string>(words->begin(), words->end());
}

TEST(WordSplitter, Gpt2KeepsOneSpaceWithTheNextWord) {
  EXPECT_THAT(Split(PreTokenizer::kGpt2, "Hello world's  123!!"),
              ElementsAre("Hello", " world", "'s", " ", " 123", "!!"));
  EXPECT_THAT(Split(PreTokenizer::kGpt2, "a\n\n b"),
              ElementsAre("a", "\n\n", " b"));
  EXPECT_THAT(Split(PreTokenizer::kGpt2, "I'VE"), ElementsAre("I", "'", "VE"));
  EXPECT_THAT(Split(PreTokenizer::kGpt2, ""), ElementsAre());
}

TEST(WordSplitter, Gpt2UsesUnicodeCategories) {
  // Cyrillic letters are letters, and "½" is a number.
  EXPECT_THAT(Split(PreTokenizer::kGpt2, "\xD0\xBD\xD0\xB0 4\xC2\xBD"),
              ElementsAre("\xD0\xBD\xD0\xB0", " 4\xC2\xBD"));
}

TEST(WordSplitter, Llama3GroupsDigitsByThreeAndNewlines) {
  EXPECT_THAT(Split(PreTokenizer::kLlama3, "1234567 I'VE\n\n x"),
              ElementsAre("123", "456", "7", " I", "'VE", "\n\n", " x"));
  EXPECT_THAT(Split(PreTokenizer::kLlama3, "(hello)"),
              ElementsAre("(hello", ")"));
}

TEST(WordSplitter, Llama3MatchesContractionsInAsciiOnly) {
  // U+017F (long s) folds to 's' under Unicode case rules, but is no
  // contraction.
  EXPECT_THAT(Split(PreTokenizer::kLlama3, "x'\xC5\xBFx"),
              ElementsAre("x", "'\xC5\xBFx"));
}

TEST(WordSplitter, Qwen2SplitsEveryDigit) {
  EXPECT_THAT(Split(PreTokenizer::kQwen2, "x1234"),
              ElementsAre("x", "1", "2", "3", "4"));
}

TEST(WordSplitter, SmolLmIsolatesDigitsThenAppliesGpt2) {
  EXPECT_THAT(Split(PreTokenizer::kSmolLm, "abc 123 x"),
              ElementsAre("abc", " ", "1", "2", "3", " x"));
}

}  // namespace
}  // namespace kvjit::tokenizer
