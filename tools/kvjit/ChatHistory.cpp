#include "tools/kvjit/ChatHistory.h"

#include "absl/strings/ascii.h"

namespace kvjit::cli {

ChatLine ClassifyChatLine(absl::string_view line) {
  const absl::string_view text = absl::StripAsciiWhitespace(line);
  if (text.empty()) return ChatLine::kEmpty;
  if (text == "/reset") return ChatLine::kReset;
  if (text == "/exit") return ChatLine::kExit;
  return ChatLine::kMessage;
}

std::vector<serve::ChatMessage> ChatHistory::MessagesFor(absl::string_view user) const {
  std::vector<serve::ChatMessage> messages;
  messages.reserve(exchanges_.size() + 2);
  if (!system_.empty()) messages.push_back({"system", system_});
  messages.insert(messages.end(), exchanges_.begin(), exchanges_.end());
  messages.push_back({"user", std::string(user)});
  return messages;
}

void ChatHistory::AddExchange(std::string user, std::string assistant) {
  exchanges_.push_back({"user", std::move(user)});
  exchanges_.push_back({"assistant", std::move(assistant)});
}

}  // namespace kvjit::cli
