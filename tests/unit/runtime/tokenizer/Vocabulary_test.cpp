#include "runtime/tokenizer/Vocabulary.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvjit::tokenizer {
namespace {

using ::testing::HasSubstr;

Vocabulary TwoTokens() {
  Vocabulary vocabulary;
  vocabulary.tokens = {"a", "b"};
  vocabulary.token_types = {TokenType::kNormal, TokenType::kNormal};
  return vocabulary;
}

std::string ErrorOf(const Vocabulary& vocabulary) {
  return std::string(ValidateVocabulary(vocabulary).message());
}

TEST(Vocabulary, ParsesModelAndPreTokenizerNames) {
  EXPECT_EQ(*ParseTokenizerModel("llama"), TokenizerModel::kSentencePiece);
  EXPECT_EQ(*ParseTokenizerModel("gpt2"), TokenizerModel::kByteLevelBpe);
  EXPECT_THAT(std::string(ParseTokenizerModel("bert").status().message()),
              HasSubstr("\"bert\" is not supported"));
  EXPECT_EQ(*ParsePreTokenizer("gpt-2"), PreTokenizer::kGpt2);
  EXPECT_EQ(*ParsePreTokenizer("default"), PreTokenizer::kGpt2);
  EXPECT_EQ(*ParsePreTokenizer("llama-bpe"), PreTokenizer::kLlama3);
  EXPECT_EQ(*ParsePreTokenizer("smollm"), PreTokenizer::kSmolLm);
  EXPECT_EQ(*ParsePreTokenizer("qwen2"), PreTokenizer::kQwen2);
  EXPECT_THAT(std::string(ParsePreTokenizer("deepseek-llm").status().message()),
              HasSubstr("\"deepseek-llm\" is not supported"));
}

TEST(Vocabulary, AcceptsAConsistentVocabulary) {
  EXPECT_TRUE(ValidateVocabulary(TwoTokens()).ok());
}

TEST(Vocabulary, RejectsInconsistentVocabularies) {
  EXPECT_THAT(ErrorOf(Vocabulary{}), HasSubstr("empty"));

  Vocabulary types = TwoTokens();
  types.token_types.pop_back();
  EXPECT_THAT(ErrorOf(types), HasSubstr("1 token types for 2 tokens"));

  Vocabulary scores = TwoTokens();
  scores.scores = {1.0f};
  EXPECT_THAT(ErrorOf(scores), HasSubstr("1 scores for 2 tokens"));

  Vocabulary bos = TwoTokens();
  bos.bos_id = 2;
  EXPECT_THAT(ErrorOf(bos), HasSubstr("BOS token id 2 is outside"));

  Vocabulary add_bos = TwoTokens();
  add_bos.add_bos_token = true;
  EXPECT_THAT(ErrorOf(add_bos), HasSubstr("no BOS token"));

  Vocabulary merges = TwoTokens();
  merges.model = TokenizerModel::kByteLevelBpe;
  EXPECT_THAT(ErrorOf(merges), HasSubstr("needs merges"));
  merges.merges = {{"a", ""}};
  EXPECT_THAT(ErrorOf(merges), HasSubstr("merge 0"));

  // Options of the last token are fine; one past it is refused.
  Vocabulary options = TwoTokens();
  options.added_token_options = {AddedTokenOptions{1}};
  EXPECT_TRUE(ValidateVocabulary(options).ok());
  options.added_token_options = {AddedTokenOptions{2}};
  EXPECT_THAT(ErrorOf(options), HasSubstr("added token id 2 is outside the vocabulary of 2"));
}

}  // namespace
}  // namespace kvjit::tokenizer
