#include "runtime/tokenizer/SpecialTokenSplitter.h"

#include <chrono>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvjit::tokenizer {
namespace {

using ::testing::ElementsAre;

struct Piece {
  std::string text;
  int32_t id;
  bool operator==(const Piece& other) const { return text == other.text && id == other.id; }
};

void PrintTo(const Piece& piece, std::ostream* out) { *out << "\"" << piece.text << "\"/" << piece.id; }

std::vector<Piece> Pieces(const SpecialTokenSplitter& splitter, std::string_view text,
                          bool parse_special) {
  std::vector<Piece> pieces;
  for (const TextFragment& fragment : splitter.Split(text, parse_special)) {
    pieces.push_back({std::string(fragment.text), fragment.special_id});
  }
  return pieces;
}

// Tokens that share their first bytes, as Gemma's <unused0> ... do.
Vocabulary SharedPrefixVocabulary() {
  Vocabulary vocabulary;
  vocabulary.tokens = {"x", "<u1>", "<u12>", "<u123>", "<u12>", "<user>"};
  vocabulary.token_types = {TokenType::kNormal,  TokenType::kControl, TokenType::kControl,
                            TokenType::kControl, TokenType::kUserDefined, TokenType::kUserDefined};
  return vocabulary;
}

TEST(SpecialTokenSplitter, TakesTheLongestTokenAtEachPosition) {
  const SpecialTokenSplitter splitter(SharedPrefixVocabulary());
  EXPECT_THAT(Pieces(splitter, "a<u123>b<u1><u12", true),
              ElementsAre(Piece{"a", -1}, Piece{"<u123>", 3}, Piece{"b", -1}, Piece{"<u1>", 1},
                          Piece{"<u12", -1}));
}

TEST(SpecialTokenSplitter, FindsControlTokensOnlyWhenAskedAndTheLowerIdOfATextFirst) {
  const SpecialTokenSplitter splitter(SharedPrefixVocabulary());
  // "<u12>" is control token 2 and user-defined token 4: parsing special
  // tokens finds 2; without, the user-defined 4, and "<u123>" stays text.
  EXPECT_THAT(Pieces(splitter, "<u12><user>", true), ElementsAre(Piece{"<u12>", 2}, Piece{"<user>", 5}));
  EXPECT_THAT(Pieces(splitter, "<u12><u123>", false),
              ElementsAre(Piece{"<u12>", 4}, Piece{"<u123>", -1}));
}

// Thousands of tokens with one first byte cost a position no more than the
// longest of them: 100 KB of '<' against 10,000 "<unused...>" tokens takes
// well under a second even in a debug build (it took 4.8 s when each
// position compared every token that starts with its byte).
TEST(SpecialTokenSplitter, ManyTokensWithOneFirstByteStayCheap) {
  Vocabulary vocabulary;
  for (int i = 0; i < 10000; ++i) {
    vocabulary.tokens.push_back(absl::StrCat("<unused", i, ">"));
    vocabulary.token_types.push_back(TokenType::kControl);
  }
  const SpecialTokenSplitter splitter(vocabulary);
  const std::string text(100000, '<');
  const auto start = std::chrono::steady_clock::now();
  const std::vector<TextFragment> fragments = splitter.Split(text + "<unused9999>", true);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_EQ(fragments.size(), 2u);
  EXPECT_EQ(fragments[1].special_id, 9999);
  EXPECT_LT(seconds, 1.0);
}

}  // namespace
}  // namespace kvjit::tokenizer
