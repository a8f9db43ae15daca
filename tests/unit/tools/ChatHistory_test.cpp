#include "tools/kvjit/ChatHistory.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvjit::cli {
namespace {

using ::testing::ElementsAre;

// A turn of role and content, without tool calls.
::testing::Matcher<const serve::ChatMessage&> Turn(const std::string& role,
                                                   const std::string& content) {
  return ::testing::AllOf(::testing::Field(&serve::ChatMessage::role, role),
                          ::testing::Field(&serve::ChatMessage::content, content),
                          ::testing::Field(&serve::ChatMessage::tool_calls, ::testing::IsEmpty()));
}

TEST(ChatHistoryTest, AFirstTurnIsTheSystemMessageAndTheUsersMessage) {
  const ChatHistory history("Be brief.");
  EXPECT_THAT(history.MessagesFor("Hi"),
              ElementsAre(Turn("system", "Be brief."), Turn("user", "Hi")));
}

TEST(ChatHistoryTest, WithoutASystemMessageTheTemplatesDefaultApplies) {
  const ChatHistory history("");
  EXPECT_THAT(history.MessagesFor("Hi"), ElementsAre(Turn("user", "Hi")));
}

TEST(ChatHistoryTest, EarlierExchangesComeBeforeTheNewMessageInOrder) {
  ChatHistory history("S");
  history.AddExchange("one", "reply one");
  history.AddExchange("two", "reply two");
  EXPECT_EQ(history.num_exchanges(), 2u);
  EXPECT_THAT(history.MessagesFor("three"),
              ElementsAre(Turn("system", "S"), Turn("user", "one"),
                          Turn("assistant", "reply one"), Turn("user", "two"),
                          Turn("assistant", "reply two"), Turn("user", "three")));
}

TEST(ChatHistoryTest, ClearForgetsTheExchangesButKeepsTheSystemMessage) {
  ChatHistory history("S");
  history.AddExchange("one", "reply one");
  history.Clear();
  EXPECT_EQ(history.num_exchanges(), 0u);
  EXPECT_THAT(history.MessagesFor("again"),
              ElementsAre(Turn("system", "S"), Turn("user", "again")));
}

TEST(ChatLineTest, CommandsAreRecognisedWithBlanksAround) {
  EXPECT_EQ(ClassifyChatLine("/reset"), ChatLine::kReset);
  EXPECT_EQ(ClassifyChatLine("  /exit "), ChatLine::kExit);
}

TEST(ChatLineTest, BlankLinesSendNothing) {
  EXPECT_EQ(ClassifyChatLine(""), ChatLine::kEmpty);
  EXPECT_EQ(ClassifyChatLine(" \t"), ChatLine::kEmpty);
}

TEST(ChatLineTest, AnythingElseIsAMessage) {
  EXPECT_EQ(ClassifyChatLine("/resetting is hard"), ChatLine::kMessage);
  EXPECT_EQ(ClassifyChatLine("What is 2 plus 2?"), ChatLine::kMessage);
}

}  // namespace
}  // namespace kvjit::cli
