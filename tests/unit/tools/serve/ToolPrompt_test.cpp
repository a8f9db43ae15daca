// How tools reach the prompt: the formats read from the published chat
// templates (tests/data/chat_templates/real), the templates that render tools
// themselves given them, and kvjit's Hermes-style text for the others, which
// renders even under templates that refuse a system turn or a tool role.

#include "tools/serve/ToolPrompt.h"

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/common/TestPaths.h"
#include "tools/serve/template/ChatTemplate.h"

namespace kvjit::serve {
namespace {

using ::testing::HasSubstr;
using Json = nlohmann::ordered_json;

std::string RealTemplate(const std::string& name) {
  const std::string path = testing::TestDataPath("chat_templates/real/" + name + ".jinja");
  std::ifstream file(path);
  std::ostringstream text;
  text << file.rdbuf();
  return text.str();
}

const Json& WeatherTools() {
  static const Json tools = Json::parse(R"([{"type": "function", "function": {
      "name": "get_weather", "description": "Weather in a city",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                     "required": ["city"]}}}])");
  return tools;
}

// The call's id is 9 letters and digits, as Mistral's template demands.
std::vector<ChatMessage> RoundTrip() {
  return {{"user", "Weather in Paris?"},
          {"assistant", "", {{"abcDEF123", "get_weather", R"({"city": "Paris"})"}}},
          {"tool", "18 C and sunny", {}, "abcDEF123"}};
}

absl::StatusOr<std::string> Render(const std::string& source, const Json& conversation) {
  auto parsed = chat_template::ChatTemplate::Parse(source);
  if (!parsed.ok()) return parsed.status();
  return chat_template::RenderConversation(*parsed, conversation, {"<s>", "</s>", "", ""});
}

TEST(ToolPromptTest, ReadsEachPublishedTemplatesFormat) {
  const struct {
    const char* name;
    bool native;
    ToolCallFormat format;
  } cases[] = {
      {"Qwen-Qwen2.5-7B-Instruct", true, ToolCallFormat::kHermes},
      {"Qwen-Qwen3-0.6B", true, ToolCallFormat::kHermes},
      {"meta-llama-Llama-3.1-8B-Instruct", true, ToolCallFormat::kLlama3Json},
      {"meta-llama-Llama-3.2-3B-Instruct", true, ToolCallFormat::kLlama3Json},
      {"mistralai-Mistral-7B-Instruct-v0.3", true, ToolCallFormat::kMistral},
      {"mistralai-Mistral-Nemo-Instruct-2407", true, ToolCallFormat::kMistral},
      {"google-gemma-2-2b-it", false, ToolCallFormat::kHermes},
      {"google-gemma-3-4b-it", false, ToolCallFormat::kHermes},
      {"microsoft-Phi-3.5-mini-instruct", false, ToolCallFormat::kHermes},
  };
  for (const auto& c : cases) {
    const std::string source = RealTemplate(c.name);
    ASSERT_FALSE(source.empty()) << c.name;
    const ToolTemplateSupport support = DetectToolSupport(source);
    EXPECT_EQ(support.native, c.native) << c.name;
    EXPECT_EQ(support.format, c.format) << c.name;
  }
  EXPECT_FALSE(DetectToolSupport("").native);
}

TEST(ToolPromptTest, NativeTemplatesRenderTheToolsAndTheRoundTrip) {
  for (const char* name : {"Qwen-Qwen2.5-7B-Instruct", "meta-llama-Llama-3.1-8B-Instruct",
                           "mistralai-Mistral-7B-Instruct-v0.3"}) {
    SCOPED_TRACE(name);
    Json conversation = {{"messages", MessagesJson(RoundTrip())},
                         {"add_generation_prompt", true},
                         {"tools", WeatherTools()}};
    auto prompt = Render(RealTemplate(name), conversation);
    ASSERT_TRUE(prompt.ok()) << prompt.status();
    EXPECT_THAT(*prompt, HasSubstr("get_weather"));
    EXPECT_THAT(*prompt, HasSubstr("Weather in a city"));
    EXPECT_THAT(*prompt, HasSubstr("Paris"));
    EXPECT_THAT(*prompt, HasSubstr("18 C and sunny"));
  }
}

TEST(ToolPromptTest, TextToolsRenderUnderTemplatesWithoutToolSupport) {
  const std::vector<ChatMessage> rewritten = WithToolsInText(RoundTrip(), WeatherTools());
  // No system turn: the instructions open the first user turn; the call is
  // text of the assistant turn; the result is a user turn.
  ASSERT_EQ(rewritten.size(), 3u);
  EXPECT_EQ(rewritten[0].role, "user");
  EXPECT_THAT(rewritten[0].content, HasSubstr("<tools>\n" + WeatherTools()[0].dump() + "\n</tools>"));
  EXPECT_TRUE(absl::EndsWith(rewritten[0].content, "\n\nWeather in Paris?"));
  EXPECT_EQ(rewritten[1].role, "assistant");
  EXPECT_EQ(rewritten[1].content,
            "<tool_call>\n{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\"}}\n</tool_call>");
  EXPECT_EQ(rewritten[2].role, "user");
  EXPECT_EQ(rewritten[2].content, "<tool_response>\n18 C and sunny\n</tool_response>");
  for (const char* name : {"google-gemma-2-2b-it", "google-gemma-3-4b-it",
                           "microsoft-Phi-3.5-mini-instruct"}) {
    SCOPED_TRACE(name);
    auto prompt = Render(RealTemplate(name), {{"messages", MessagesJson(rewritten)},
                                              {"add_generation_prompt", true}});
    ASSERT_TRUE(prompt.ok()) << prompt.status();
    EXPECT_THAT(*prompt, HasSubstr("<tool_call>"));
    EXPECT_THAT(*prompt, HasSubstr("<tool_response>"));
  }
}

TEST(ToolPromptTest, InstructionsJoinASystemTurnAndResultsShareATurn) {
  std::vector<ChatMessage> messages = {{"system", "Be brief."}, {"user", "Two cities?"},
                                       {"assistant", "Checking.",
                                        {{"a", "get_weather", R"({"city": "Paris"})"},
                                         {"b", "get_weather", R"({"city": "Rome"})"}}},
                                       {"tool", "18 C", {}, "a"},
                                       {"tool", "25 C", {}, "b"}};
  const std::vector<ChatMessage> rewritten = WithToolsInText(messages, WeatherTools());
  ASSERT_EQ(rewritten.size(), 4u);
  EXPECT_TRUE(absl::StartsWith(rewritten[0].content, "Be brief.\n\n"));
  EXPECT_THAT(rewritten[0].content, HasSubstr("get_weather"));
  EXPECT_EQ(rewritten[1].content, "Two cities?");
  EXPECT_TRUE(absl::StartsWith(rewritten[2].content, "Checking.\n<tool_call>\n"));
  EXPECT_THAT(rewritten[2].content, HasSubstr("Rome"));
  EXPECT_EQ(rewritten[3].content,
            "<tool_response>\n18 C\n</tool_response>\n<tool_response>\n25 C\n</tool_response>");
  // Without tools the turns are rewritten all the same, with no instructions.
  EXPECT_EQ(WithToolsInText(messages, Json::array())[0].content, "Be brief.");
}

}  // namespace
}  // namespace kvjit::serve
