#include "runtime/tokenizer/Utf8.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvjit::tokenizer {
namespace {

using ::testing::HasSubstr;

TEST(Utf8, AcceptsWellFormedText) {
  EXPECT_TRUE(CheckUtf8("").ok());
  EXPECT_TRUE(CheckUtf8("a\xC3\xA9\xE2\x96\x81\xF0\x9F\xA6\x99").ok());
}

TEST(Utf8, RejectsMalformedTextNamingTheOffset) {
  const absl::Status truncated = CheckUtf8("ab\xF0\x9F");
  ASSERT_FALSE(truncated.ok());
  EXPECT_THAT(std::string(truncated.message()), HasSubstr("0xf0 at offset 2"));
  EXPECT_FALSE(CheckUtf8("\xC0\x80").ok());          // overlong
  EXPECT_FALSE(CheckUtf8("\xED\xA0\x80").ok());      // surrogate
  EXPECT_FALSE(CheckUtf8("\xF4\x90\x80\x80").ok());  // above U+10FFFF
  EXPECT_FALSE(CheckUtf8("\x80").ok());
}

TEST(Utf8, EncodesCodePoints) {
  std::string text;
  for (uint32_t code_point : {0x41u, 0xE9u, 0x2581u, 0x1F999u}) {
    AppendUtf8(code_point, &text);
  }
  EXPECT_EQ(text, "A\xC3\xA9\xE2\x96\x81\xF0\x9F\xA6\x99");
}

TEST(Utf8, FindsTheIncompleteTail) {
  EXPECT_EQ(IncompleteUtf8SuffixLength(""), 0u);
  EXPECT_EQ(IncompleteUtf8SuffixLength("a\xC3\xA9"), 0u);
  EXPECT_EQ(IncompleteUtf8SuffixLength("a\xC3"), 1u);
  EXPECT_EQ(IncompleteUtf8SuffixLength("a\xF0\x9F\xA6"), 3u);
  EXPECT_EQ(IncompleteUtf8SuffixLength("\xF0\x9F\xA6\x99"), 0u);
}

TEST(Utf8Test, CharacterLengthAtStopsAtTheTextsEnd) {
  const std::string text = "a\xC3\xA9\xE2\x96";  // a, é, and a cut-short U+2581
  EXPECT_EQ(CharacterLengthAt(text, 0), 1u);
  EXPECT_EQ(CharacterLengthAt(text, 1), 2u);
  EXPECT_EQ(CharacterLengthAt(text, 3), 2u);  // three by its lead, two left
  EXPECT_EQ(CharacterLengthAt(text, 4), 1u);  // a stray continuation byte
}

TEST(Utf8Test, FindsUnicodeWhitespaceAtEitherEnd) {
  // U+00A0 and U+3000 are White_Space; U+200B (zero width space) is not.
  const std::string text = " \xC2\xA0x\xE2\x80\x8B\xE3\x80\x80\t";
  EXPECT_EQ(LeadingWhitespaceLength(text), 3u);
  EXPECT_EQ(TrailingWhitespaceStart(text), 7u);
  EXPECT_EQ(LeadingWhitespaceLength(" \t\n"), 3u);
  EXPECT_EQ(TrailingWhitespaceStart(" \t\n"), 0u);
  EXPECT_EQ(LeadingWhitespaceLength(""), 0u);
  EXPECT_EQ(TrailingWhitespaceStart("x"), 1u);
}

}  // namespace
}  // namespace kvjit::tokenizer
