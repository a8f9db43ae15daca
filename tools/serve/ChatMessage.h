#ifndef KVJIT_TOOLS_SERVE_CHATMESSAGE_H_
#define KVJIT_TOOLS_SERVE_CHATMESSAGE_H_

#include <string>
#include <utility>
#include <vector>

namespace kvjit::serve {

// A function call an assistant turn made, as the OpenAI API's `tool_calls`
// give it back in later requests.
struct ChatToolCall {
  std::string id;
  std::string name;
  std::string arguments;  // a JSON object, as text
};

// One turn of a chat conversation, as the OpenAI API's `messages` give it.
struct ChatMessage {
  ChatMessage() = default;
  ChatMessage(std::string role, std::string content, std::vector<ChatToolCall> tool_calls = {},
              std::string tool_call_id = "")
      : role(std::move(role)),
        content(std::move(content)),
        tool_calls(std::move(tool_calls)),
        tool_call_id(std::move(tool_call_id)) {}

  std::string role;  // "system", "user", "assistant" or "tool"
  std::string content;
  // An assistant turn's function calls.
  std::vector<ChatToolCall> tool_calls;
  // A tool turn: the call it answers.
  std::string tool_call_id;
};

}  // namespace kvjit::serve

#endif  // KVJIT_TOOLS_SERVE_CHATMESSAGE_H_
