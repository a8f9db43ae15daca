#include "tools/kvjit/ChatHistory.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvjit::cli {
namespace {

using ::testing::ElementsAre;
using ::testing::FieldsAre;

TEST(ChatHistoryTest, AFirstTurnIsTheSystemMessageAndTheUsersMessage) {
  const ChatHistory history("Be brief.");
  EXPECT_THAT(history.MessagesFor("Hi"),
              ElementsAre(FieldsAre("system", "Be brief."), FieldsAre("user", "Hi")));
}

TEST(ChatHistoryTest, WithoutASystemMessageTheTemplatesDefaultApplies) {
  const ChatHistory history("");
  EXPECT_THAT(history.MessagesFor("Hi"), ElementsAre(FieldsAre("user", "Hi")));
}

TEST(ChatHistoryTest, EarlierExchangesComeBeforeTheNewMessageInOrder) {
  ChatHistory history("S");
  history.AddExchange("one", "reply one");
  history.AddExchange("two", "reply two");
  EXPECT_EQ(history.num_exchanges(), 2u);
  EXPECT_THAT(history.MessagesFor("three"),
              ElementsAre(FieldsAre("system", "S"), FieldsAre("user", "one"),
                          FieldsAre("assistant", "reply one"), FieldsAre("user", "two"),
                          FieldsAre("assistant", "reply two"), FieldsAre("user", "three")));
}

TEST(ChatHistoryTest, ClearForgetsTheExchangesButKeepsTheSystemMessage) {
  ChatHistory history("S");
  history.AddExchange("one", "reply one");
  history.Clear();
  EXPECT_EQ(history.num_exchanges(), 0u);
  EXPECT_THAT(history.MessagesFor("again"),
              ElementsAre(FieldsAre("system", "S"), FieldsAre("user", "again")));
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
