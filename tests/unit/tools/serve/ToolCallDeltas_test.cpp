#include "tools/serve/ToolCallDeltas.h"

#include <optional>
#include <string>

#include "absl/strings/ascii.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvjit::serve {
namespace {

ChoiceDelta Text(int64_t index, std::string text, std::optional<ChoiceFinish> finish = std::nullopt) {
  ChoiceDelta delta;
  delta.index = index;
  delta.text = std::move(text);
  delta.finish = finish;
  return delta;
}

TEST(ToolCallDeltasTest, EachChoiceReportsItsCallsWholeAndFinishesWithToolCalls) {
  ToolCallDeltas deltas(ToolCallFormat::kHermes, 2);
  ChoiceDelta first = deltas.Transform(Text(0, "Let me check.\n<tool_call>\n{\"name\": \"f\", "));
  EXPECT_EQ(first.text, "Let me check.");
  EXPECT_TRUE(first.tool_calls.empty());
  // The other choice only talks.
  ChoiceDelta other = deltas.Transform(Text(1, "No tools needed.", ChoiceFinish::kStop));
  EXPECT_EQ(other.text, "No tools needed.");
  EXPECT_EQ(other.finish, ChoiceFinish::kStop);

  ChoiceDelta call = deltas.Transform(Text(0, "\"arguments\": {\"x\": 1}}\n</tool_call>\n"));
  ASSERT_EQ(call.tool_calls.size(), 1u);
  EXPECT_EQ(call.tool_calls[0].index, 0);
  EXPECT_EQ(call.tool_calls[0].name, "f");
  EXPECT_EQ(call.tool_calls[0].arguments, R"({"x":1})");
  EXPECT_EQ(call.tool_calls[0].id.rfind("call_", 0), 0u);
  EXPECT_EQ(call.tool_calls[0].id.size(), 29u);

  ChoiceDelta last = deltas.Transform(
      Text(0, "<tool_call>\n{\"name\": \"g\", \"arguments\": {}}\n</tool_call>", ChoiceFinish::kStop));
  ASSERT_EQ(last.tool_calls.size(), 1u);
  EXPECT_EQ(last.tool_calls[0].index, 1);
  EXPECT_NE(last.tool_calls[0].id, call.tool_calls[0].id);
  EXPECT_EQ(last.finish, ChoiceFinish::kToolCalls);
}

TEST(ToolCallDeltasTest, ALengthCutKeepsItsReasonAndAnUnfinishedCallIsText) {
  ToolCallDeltas deltas(ToolCallFormat::kHermes, 1);
  ChoiceDelta held = deltas.Transform(Text(0, "<tool_call>\n{\"name\": \"f\""));
  EXPECT_EQ(held.text, "");
  ChoiceDelta cut = deltas.Transform(Text(0, ", \"argu", ChoiceFinish::kLength));
  EXPECT_EQ(cut.text, "<tool_call>\n{\"name\": \"f\", \"argu");
  EXPECT_TRUE(cut.tool_calls.empty());
  EXPECT_EQ(cut.finish, ChoiceFinish::kLength);
}

TEST(ToolCallDeltasTest, MistralCallIdsAreNineLettersAndDigits) {
  ToolCallDeltas deltas(ToolCallFormat::kMistral, 1);
  ChoiceDelta delta = deltas.Transform(
      Text(0, R"([TOOL_CALLS][{"name": "f", "arguments": {"a": "b"}}])", ChoiceFinish::kStop));
  ASSERT_EQ(delta.tool_calls.size(), 1u);
  const std::string& id = delta.tool_calls[0].id;
  ASSERT_EQ(id.size(), 9u);
  for (const char c : id) EXPECT_TRUE(absl::ascii_isalnum(static_cast<unsigned char>(c))) << id;
  EXPECT_EQ(delta.finish, ChoiceFinish::kToolCalls);
}

}  // namespace
}  // namespace kvjit::serve
