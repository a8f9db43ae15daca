// Focused tests of the chat-template library: the lexer's whitespace
// control, parse errors naming their line, Undefined, the conversation
// helper.

#include "tools/serve/template/ChatTemplate.h"

#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tools/serve/template/Lexer.h"
#include "tools/serve/template/Value.h"

namespace kvjit::chat_template {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;
using Json = nlohmann::ordered_json;

std::string Render(const std::string& source, const Json& context = Json::object()) {
  absl::StatusOr<ChatTemplate> chat = ChatTemplate::Parse(source);
  if (!chat.ok()) return "PARSE ERROR: " + std::string(chat.status().message());
  absl::StatusOr<std::string> out = chat->Render(context);
  if (!out.ok()) return "RENDER ERROR: " + std::string(out.status().message());
  return *out;
}

std::string ParseError(const std::string& source) {
  absl::StatusOr<ChatTemplate> chat = ChatTemplate::Parse(source);
  return chat.ok() ? "" : std::string(chat.status().message());
}

TEST(Lexer, TagsAndText) {
  absl::StatusOr<std::vector<Token>> tokens = Tokenize("a{{ x.y }}b{% if z %}c");
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  std::vector<TokenKind> kinds;
  for (const Token& token : *tokens) kinds.push_back(token.kind);
  EXPECT_EQ(kinds, (std::vector<TokenKind>{TokenKind::kText, TokenKind::kVariableBegin, TokenKind::kName,
                                           TokenKind::kOperator, TokenKind::kName, TokenKind::kVariableEnd,
                                           TokenKind::kText, TokenKind::kBlockBegin, TokenKind::kName,
                                           TokenKind::kName, TokenKind::kBlockEnd, TokenKind::kText,
                                           TokenKind::kEnd}));
}

TEST(Lexer, CountsLines) {
  absl::StatusOr<std::vector<Token>> tokens = Tokenize("a\nb\n{{ x\n }}");
  ASSERT_TRUE(tokens.ok());
  EXPECT_EQ((*tokens)[1].line, 3);  // {{
  EXPECT_EQ((*tokens)[3].line, 4);  // }}
}

TEST(Lexer, StringEscapes) {
  EXPECT_EQ(Render("{{ 'a\\nb\\u00e9' }}"), "a\nb\xc3\xa9");
}

TEST(Lexer, WhitespaceControl) {
  EXPECT_EQ(Render("{% if true %}\nx\n{% endif %}\ny"), "x\ny");  // trim_blocks
  EXPECT_EQ(Render("  {% if true %}x{% endif %}"), "x");            // lstrip_blocks
  EXPECT_EQ(Render("a  {{- 'b' -}}  c"), "abc");
  EXPECT_EQ(Render("{{ 'a' }}\n"), "a");  // one trailing newline dropped
  EXPECT_EQ(Render("  {%+ if true %}x{% endif %}"), "  x");
}

TEST(Parser, ErrorsNameTheLine) {
  EXPECT_THAT(ParseError("a\n{% for x in y %}\nb"), StartsWith("line 3: Unexpected end of template."));
  EXPECT_THAT(ParseError("a\n\n{% frobnicate %}"), StartsWith("line 3: Encountered unknown tag 'frobnicate'."));
  EXPECT_THAT(ParseError("{{ 1 + }}"), StartsWith("line 1: unexpected"));
  EXPECT_THAT(ParseError("x\n{{ (1 }}"), StartsWith("line 2:"));
  EXPECT_THAT(ParseError("x\n{# open"), StartsWith("line 2: Missing end of comment tag"));
  EXPECT_THAT(ParseError("{{ x | nope }}"), HasSubstr("No filter named 'nope'."));
  EXPECT_THAT(ParseError("{% if x is nope %}{% endif %}"), HasSubstr("No test named 'nope'."));
  EXPECT_THAT(ParseError("{% if a %}{% endfor %}"), HasSubstr("Encountered unknown tag 'endfor'."));
  EXPECT_THAT(ParseError("{% include 'x' %}"), HasSubstr("not supported"));
}

TEST(Parser, DeepNestingIsAnError) {
  EXPECT_THAT(ParseError("{{ " + std::string(5000, '(')), StartsWith("line 1:"));
  std::string ifs;
  for (int i = 0; i < 1000; ++i) ifs += "{% if x %}";
  EXPECT_FALSE(ParseError(ifs).empty());
}

TEST(Evaluator, UndefinedBehavesAsJinja2) {
  EXPECT_EQ(Render("[{{ nope }}]{{ nope is defined }}{{ nope | length }}"), "[]False0");
  EXPECT_EQ(Render("{{ nope.x }}"), "RENDER ERROR: line 1: 'nope' is undefined");
  EXPECT_EQ(Render("{{ d.x }}|{{ d.x.y }}", Json{{"d", Json::object()}}),
            "RENDER ERROR: line 1: 'dict object' has no attribute 'x'");
}

TEST(Evaluator, RaiseExceptionCarriesExactlyTheMessage) {
  absl::StatusOr<ChatTemplate> chat = ChatTemplate::Parse("a\n{{ raise_exception('Bad roles!') }}");
  ASSERT_TRUE(chat.ok());
  absl::StatusOr<std::string> out = chat->Render(Json::object());
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().message(), "Bad roles!");
  EXPECT_TRUE(IsTemplateException(out.status()));
}

TEST(Evaluator, RuntimeErrorsNameTheLine) {
  absl::StatusOr<ChatTemplate> chat = ChatTemplate::Parse("a\nb\n{{ 1 / 0 }}");
  ASSERT_TRUE(chat.ok());
  absl::StatusOr<std::string> out = chat->Render(Json::object());
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().message(), "line 3: division by zero");
  EXPECT_FALSE(IsTemplateException(out.status()));
}

TEST(Evaluator, KeyOrderFollowsTheContext) {
  const Json context = Json::parse(R"({"d": {"z": 1, "a": 2}})");
  EXPECT_EQ(Render("{{ d | tojson }}", context), "{\"z\": 1, \"a\": 2}");
}

TEST(Evaluator, RecursionIsBounded) {
  EXPECT_THAT(Render("{% macro m() %}{{ m() }}{% endmacro %}{{ m() }}"), HasSubstr("nested too deeply"));
}

TEST(Value, PythonFloatRepr) {
  EXPECT_EQ(PythonFloatRepr(1.0), "1.0");
  EXPECT_EQ(PythonFloatRepr(0.1), "0.1");
  EXPECT_EQ(PythonFloatRepr(1e-7), "1e-07");
  EXPECT_EQ(PythonFloatRepr(1e22), "1e+22");
  EXPECT_EQ(PythonFloatRepr(123456789012345678.0), "1.2345678901234568e+17");
  EXPECT_EQ(PythonFloatRepr(-0.0), "-0.0");
  EXPECT_EQ(PythonFloatRepr(0.0001), "0.0001");
}

TEST(RenderConversation, PassesWhatApplyChatTemplatePasses) {
  absl::StatusOr<ChatTemplate> chat = ChatTemplate::Parse(
      "{{ bos_token }}{% for m in messages %}{{ m.role }}:{{ m.content }};{% endfor %}"
      "{{ tools is defined }}{{ add_generation_prompt }}{{ eos_token is defined }}{{ enable_thinking }}");
  ASSERT_TRUE(chat.ok());
  const Json conversation = Json::parse(R"({"messages": [{"role": "user", "content": "hi"}], "enable_thinking": false})");
  absl::StatusOr<std::string> out = RenderConversation(*chat, conversation, {"<s>", "", "", ""});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, "<s>user:hi;FalseFalseFalseFalse");
  EXPECT_FALSE(RenderConversation(*chat, Json::object(), {}).ok());
}

}  // namespace
}  // namespace kvjit::chat_template
