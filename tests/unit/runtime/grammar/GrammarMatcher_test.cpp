#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "frontend/gguf/GgufFile.h"
#include "frontend/tokenizer/GgufVocabulary.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/grammar/GrammarCompiler.h"
#include "runtime/grammar/GrammarMatcher.h"
#include "tests/unit/common/TestPaths.h"

namespace kvjit::grammar {
namespace {

using ::testing::HasSubstr;
using Kind = GrammarSpec::Kind;

bool IsAllowed(absl::Span<const uint32_t> mask, int32_t token) {
  return static_cast<size_t>(token / 32) < mask.size() && ((mask[token / 32] >> (token % 32)) & 1u);
}

// The matcher's allowed tokens, which must not be an error.
absl::Span<const uint32_t> Allowed(GrammarMatcher& matcher) {
  absl::StatusOr<absl::Span<const uint32_t>> allowed = matcher.AllowedTokens();
  EXPECT_TRUE(allowed.ok()) << allowed.status();
  return allowed.ok() ? *allowed : absl::Span<const uint32_t>();
}

std::vector<int32_t> AllowedIds(absl::Span<const uint32_t> mask) {
  std::vector<int32_t> ids;
  for (int32_t token = 0; token < static_cast<int32_t>(mask.size()) * 32; ++token) {
    if (IsAllowed(mask, token)) ids.push_back(token);
  }
  return ids;
}

std::unique_ptr<tokenizer::Tokenizer> LoadTokenizer(const std::string& path) {
  auto file = gguf::GgufFile::Open(path);
  if (!file.ok()) return nullptr;
  auto tokenizer = tokenizer::LoadTokenizerFromGguf(**file);
  return tokenizer.ok() ? *std::move(tokenizer) : nullptr;
}

// SmolLM2's byte-level BPE vocabulary (49,152 tokens), with the logits'
// vocabulary a little wider than the tokenizer's, as padded models have.
class SmolLm2GrammarTest : public ::testing::Test {
 protected:
  static constexpr int64_t kLogitsVocab = 49152 + 64;

  void SetUp() override {
    const std::string path = testing::DownloadedModelPath("SmolLM2-135M-Instruct.Q4_1.gguf");
    if (path.empty()) GTEST_SKIP() << "SmolLM2 is not downloaded: run tools/scripts/fetch_model.sh";
    tokenizer_ = LoadTokenizer(path);
    ASSERT_NE(tokenizer_, nullptr);
    auto compiler = GrammarCompiler::Create(*tokenizer_, kLogitsVocab);
    ASSERT_TRUE(compiler.ok()) << compiler.status();
    compiler_ = *std::move(compiler);
    stop_ = {tokenizer_->eos_id()};
  }

  std::shared_ptr<const CompiledGrammar> Compile(const GrammarSpec& spec) {
    auto compiled = compiler_->Compile(spec);
    EXPECT_TRUE(compiled.ok()) << compiled.status();
    return compiled.ok() ? *compiled : nullptr;
  }

  // Feeds `text`'s tokens, each of which must be allowed where it comes.
  void Walk(GrammarMatcher& matcher, const std::string& text) {
    auto tokens = tokenizer_->Encode(text, /*add_special=*/false, /*parse_special=*/false);
    ASSERT_TRUE(tokens.ok()) << tokens.status();
    for (int32_t token : *tokens) {
      ASSERT_TRUE(IsAllowed(Allowed(matcher), token))
          << "token " << token << " (" << tokenizer_->TokenToPiece(token) << ") of " << text;
      ASSERT_TRUE(matcher.Accept(token).ok());
    }
  }

  std::unique_ptr<tokenizer::Tokenizer> tokenizer_;
  std::unique_ptr<GrammarCompiler> compiler_;
  std::vector<int32_t> stop_;
};

TEST_F(SmolLm2GrammarTest, JsonSchemaAllowsItsObjectThenOnlyTheStopToken) {
  auto grammar = Compile({Kind::kJsonSchema,
                          R"({"type": "object", "properties": {"name": {"type": "string"},
                              "age": {"type": "integer", "minimum": 0}},
                              "required": ["name", "age"], "additionalProperties": false})",
                          {}});
  ASSERT_NE(grammar, nullptr);
  GrammarMatcher matcher = grammar->NewMatcher(stop_);
  EXPECT_EQ(grammar->bitmask_words(), (kLogitsVocab + 31) / 32);
  // Only what may open the object: not text, not a stop token, not a
  // padding id past the tokenizer's vocabulary.
  absl::Span<const uint32_t> first = Allowed(matcher);
  EXPECT_FALSE(IsAllowed(first, tokenizer_->eos_id()));
  EXPECT_FALSE(IsAllowed(first, static_cast<int32_t>(kLogitsVocab - 1)));
  auto hello = tokenizer_->Encode("Hello", false, false);
  ASSERT_TRUE(hello.ok());
  EXPECT_FALSE(IsAllowed(first, hello->front()));

  Walk(matcher, R"({"name": "Ada", "age": 36})");
  EXPECT_THAT(AllowedIds(Allowed(matcher)), ::testing::ElementsAre(tokenizer_->eos_id()));
  EXPECT_FALSE(matcher.Terminated());
  ASSERT_TRUE(matcher.Accept(tokenizer_->eos_id()).ok());
  EXPECT_TRUE(matcher.Terminated());
  EXPECT_TRUE(Allowed(matcher).empty());
}

TEST_F(SmolLm2GrammarTest, DisallowedTokenIsAnErrorNamingIt) {
  auto grammar = Compile({Kind::kJsonObject, "", {}});
  ASSERT_NE(grammar, nullptr);
  GrammarMatcher matcher = grammar->NewMatcher(stop_);
  auto word = tokenizer_->Encode("Hello", false, false);
  ASSERT_TRUE(word.ok());
  const absl::Status status = matcher.Accept(word->front());
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(status.message(), HasSubstr(absl::StrCat("token ", word->front())));
  // The matcher is where it was: an object may still open.
  Walk(matcher, "{}");
}

TEST_F(SmolLm2GrammarTest, JsonObjectRefusesOtherValues) {
  auto grammar = Compile({Kind::kJsonObject, "", {}});
  ASSERT_NE(grammar, nullptr);
  GrammarMatcher matcher = grammar->NewMatcher(stop_);
  auto bracket = tokenizer_->Encode("[", false, false);
  ASSERT_TRUE(bracket.ok());
  EXPECT_FALSE(IsAllowed(Allowed(matcher), bracket->front()));
  Walk(matcher, R"({"a": [1, 2.5, null, true]})");
  EXPECT_TRUE(IsAllowed(Allowed(matcher), tokenizer_->eos_id()));
}

TEST_F(SmolLm2GrammarTest, WhitespaceBetweenJsonTokensIsBoundedAt20Characters) {
  auto grammar = Compile({Kind::kJsonObject, "", {}});
  ASSERT_NE(grammar, nullptr);
  GrammarMatcher matcher = grammar->NewMatcher(stop_);
  Walk(matcher, "{");
  auto space = tokenizer_->Encode(" ", false, false);
  ASSERT_TRUE(space.ok());
  ASSERT_EQ(space->size(), 1u);
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(IsAllowed(Allowed(matcher), space->front())) << "space " << i + 1;
    ASSERT_TRUE(matcher.Accept(space->front()).ok());
  }
  EXPECT_FALSE(IsAllowed(Allowed(matcher), space->front()));
  Walk(matcher, "}");
}

TEST_F(SmolLm2GrammarTest, TaggedJsonTakesOneToMaxRepeatsOfItsItem) {
  GrammarSpec spec{Kind::kTaggedJson,
                   R"({"type": "object", "properties": {"name": {"const": "f"},
                       "arguments": {"type": "object", "properties": {"x": {"type": "integer"}},
                                     "required": ["x"]}},
                       "required": ["name", "arguments"]})",
                   {}};
  spec.prefix = "<tool_call>\n";
  spec.suffix = "\n</tool_call>";
  spec.separator = "\n";
  spec.max_repeats = 2;
  auto grammar = Compile(spec);
  ASSERT_NE(grammar, nullptr);
  const std::string call = R"(<tool_call>
{"name": "f", "arguments": {"x": 1}}
</tool_call>)";
  GrammarMatcher matcher = grammar->NewMatcher(stop_);
  auto hello = tokenizer_->Encode("Hello", false, false);
  ASSERT_TRUE(hello.ok());
  EXPECT_FALSE(IsAllowed(Allowed(matcher), hello->front()));
  Walk(matcher, call);
  EXPECT_TRUE(IsAllowed(Allowed(matcher), tokenizer_->eos_id()));
  Walk(matcher, "\n" + call);
  // The second call is the last.
  EXPECT_THAT(AllowedIds(Allowed(matcher)), ::testing::ElementsAre(tokenizer_->eos_id()));

  GrammarMatcher wrong_name = grammar->NewMatcher(stop_);
  Walk(wrong_name, "<tool_call>\n{\"name\": \"");
  auto g = tokenizer_->Encode("g", false, false);
  ASSERT_TRUE(g.ok());
  EXPECT_FALSE(IsAllowed(Allowed(wrong_name), g->front()));

  spec.max_repeats = 0;
  EXPECT_EQ(compiler_->Compile(spec).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(SmolLm2GrammarTest, RegexAndEbnf) {
  auto regex = Compile({Kind::kRegex, "[0-9]{3}-[a-z]+", {}});
  ASSERT_NE(regex, nullptr);
  GrammarMatcher by_regex = regex->NewMatcher(stop_);
  Walk(by_regex, "123-abc");
  EXPECT_TRUE(IsAllowed(Allowed(by_regex), tokenizer_->eos_id()));

  auto ebnf = Compile({Kind::kEbnf, R"(root ::= "yes" | "no" " " [0-9]+)", {}});
  ASSERT_NE(ebnf, nullptr);
  GrammarMatcher by_ebnf = ebnf->NewMatcher(stop_);
  Walk(by_ebnf, "no 42");
  EXPECT_TRUE(IsAllowed(Allowed(by_ebnf), tokenizer_->eos_id()));
}

TEST_F(SmolLm2GrammarTest, ChoiceTakesQuotesBackslashesAndControlCharactersLiterally) {
  const std::vector<std::string> choices = {"say \"hi\"", "back\\slash", "tab\there", "plain"};
  auto grammar = Compile({Kind::kChoice, "", choices});
  ASSERT_NE(grammar, nullptr);
  for (const std::string& choice : choices) {
    GrammarMatcher matcher = grammar->NewMatcher(stop_);
    Walk(matcher, choice);
    EXPECT_THAT(AllowedIds(Allowed(matcher)), ::testing::ElementsAre(tokenizer_->eos_id()))
        << choice;
  }
}

TEST_F(SmolLm2GrammarTest, WithoutStopTokensNothingFollowsTheEnd) {
  auto grammar = Compile({Kind::kChoice, "", {"done"}});
  ASSERT_NE(grammar, nullptr);
  GrammarMatcher matcher = grammar->NewMatcher({});
  EXPECT_FALSE(IsAllowed(Allowed(matcher), tokenizer_->eos_id()));
  Walk(matcher, "done");
  EXPECT_TRUE(Allowed(matcher).empty());
}

TEST_F(SmolLm2GrammarTest, PreparedMaskIsTheMaskAskedFor) {
  auto grammar = Compile({Kind::kRegex, "(ab|cd)+", {}});
  ASSERT_NE(grammar, nullptr);
  GrammarMatcher prepared = grammar->NewMatcher(stop_);
  GrammarMatcher asked = grammar->NewMatcher(stop_);
  Walk(prepared, "ab");
  Walk(asked, "ab");
  prepared.PrepareAllowedTokens();
  const std::vector<int32_t> expected = AllowedIds(Allowed(asked));
  EXPECT_EQ(AllowedIds(Allowed(prepared)), expected);
  EXPECT_FALSE(expected.empty());
}

TEST_F(SmolLm2GrammarTest, BadGrammarsAreInvalidArgumentsNamingTheirKind) {
  const struct {
    GrammarSpec spec;
    const char* kind;
  } cases[] = {
      {{Kind::kJsonSchema, "{not json", {}}, "json_schema: "},
      {{Kind::kJsonSchema, R"({"type": "no-such-type"})", {}}, "json_schema: "},
      {{Kind::kJsonSchema, "", {}}, "json_schema: it is empty"},
      {{Kind::kRegex, "(unclosed", {}}, "regex: "},
      {{Kind::kEbnf, "root ::= missing_rule", {}}, "grammar: "},
      {{Kind::kEbnf, "no rules here", {}}, "grammar: "},
      {{Kind::kChoice, "", {}}, "choice: the list of choices is empty"},
  };
  for (const auto& c : cases) {
    auto compiled = compiler_->Compile(c.spec);
    ASSERT_FALSE(compiled.ok()) << c.spec.text;
    EXPECT_EQ(compiled.status().code(), absl::StatusCode::kInvalidArgument) << c.spec.text;
    EXPECT_THAT(compiled.status().message(), HasSubstr(c.kind)) << compiled.status();
    // One line, without xgrammar's source locations.
    EXPECT_THAT(compiled.status().message(), ::testing::Not(HasSubstr(".cc:"))) << compiled.status();
  }
}

// stories260K: a SentencePiece vocabulary with byte fallback, where a
// token's text starts with the space its ▁ stands for.
TEST(SentencePieceGrammarTest, TokensSpellTheirSpaces) {
  const std::string path = testing::SharedPath("models/stories260K.gguf");
  if (path.empty()) GTEST_SKIP() << "../shared/models/stories260K.gguf is missing";
  std::unique_ptr<tokenizer::Tokenizer> tokenizer = LoadTokenizer(path);
  ASSERT_NE(tokenizer, nullptr);
  auto compiler = GrammarCompiler::Create(*tokenizer, tokenizer->vocab_size());
  ASSERT_TRUE(compiler.ok()) << compiler.status();
  auto grammar = (*compiler)->Compile({Kind::kRegex, " [a-z]+( [a-z]+)*\\.", {}});
  ASSERT_TRUE(grammar.ok()) << grammar.status();
  GrammarMatcher matcher = (*grammar)->NewMatcher({tokenizer->eos_id()});
  auto tokens = tokenizer->Encode("once upon a time.", /*add_special=*/false, false);
  ASSERT_TRUE(tokens.ok());
  ASSERT_EQ(tokenizer->TokenToPiece(tokens->front()).front(), ' ');
  for (int32_t token : *tokens) {
    ASSERT_TRUE(IsAllowed(Allowed(matcher), token)) << tokenizer->TokenToPiece(token);
    ASSERT_TRUE(matcher.Accept(token).ok());
  }
  EXPECT_THAT(AllowedIds(Allowed(matcher)), ::testing::ElementsAre(tokenizer->eos_id()));
  // BOS decodes to nothing: never allowed.
  GrammarMatcher fresh = (*grammar)->NewMatcher({tokenizer->eos_id()});
  EXPECT_FALSE(IsAllowed(Allowed(fresh), tokenizer->bos_id()));
}

TEST(GrammarCompilerTest, RefusesAnEmptyLogitsVocabulary) {
  const std::string path = testing::SharedPath("models/stories260K.gguf");
  if (path.empty()) GTEST_SKIP() << "../shared/models/stories260K.gguf is missing";
  std::unique_ptr<tokenizer::Tokenizer> tokenizer = LoadTokenizer(path);
  ASSERT_NE(tokenizer, nullptr);
  EXPECT_EQ(GrammarCompiler::Create(*tokenizer, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  // Exactly the tokenizer's vocabulary, and one narrower (the extra token
  // is never allowed), both work.
  EXPECT_TRUE(GrammarCompiler::Create(*tokenizer, tokenizer->vocab_size()).ok());
  EXPECT_TRUE(GrammarCompiler::Create(*tokenizer, tokenizer->vocab_size() - 1).ok());
}

}  // namespace
}  // namespace kvjit::grammar
