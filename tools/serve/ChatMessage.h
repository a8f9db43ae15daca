#ifndef KVJIT_TOOLS_SERVE_CHATMESSAGE_H_
#define KVJIT_TOOLS_SERVE_CHATMESSAGE_H_

#include <string>

namespace kvjit::serve {

// One turn of a chat conversation, as the OpenAI API's `messages` give it.
struct ChatMessage {
  std::string role;  // "system", "user" or "assistant"
  std::string content;
};

}  // namespace kvjit::serve

#endif  // KVJIT_TOOLS_SERVE_CHATMESSAGE_H_
