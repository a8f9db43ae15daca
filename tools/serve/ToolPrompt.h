#ifndef KVJIT_TOOLS_SERVE_TOOLPROMPT_H_
#define KVJIT_TOOLS_SERVE_TOOLPROMPT_H_

#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "nlohmann/json.hpp"
#include "tools/serve/ChatMessage.h"
#include "tools/serve/ToolCallParser.h"

// How tools reach a chat model's prompt, and in which format its replies
// call them.
namespace kvjit::serve {

struct ToolTemplateSupport {
  // The template renders `tools`, assistant `tool_calls` and tool turns
  // itself; otherwise WithToolsInText writes them into the messages.
  bool native = false;
  // The format its replies call functions in: the template's own (Hermes
  // <tool_call> tags for Qwen2.5 and Qwen3, Llama 3.1/3.2's JSON, Mistral's
  // [TOOL_CALLS]), else the Hermes format WithToolsInText teaches.
  ToolCallFormat format = ToolCallFormat::kHermes;
};

// Reads a chat template's source for the formats it knows; "" (no
// template: ChatML) has none.
ToolTemplateSupport DetectToolSupport(absl::string_view template_source);

// The conversation as a template without tool support can render it: the
// tools' signatures and how to call them (Hermes-style <tool_call> tags) at
// the end of the system turn, or at the start of the first user turn where
// there is no system turn (some templates refuse one); an assistant turn's
// calls as <tool_call> blocks after its text; tool results as user turns of
// <tool_response> blocks, consecutive results in one turn (so that turns
// still alternate).
std::vector<ChatMessage> WithToolsInText(absl::Span<const ChatMessage> messages,
                                         const nlohmann::ordered_json& tools);

// The `messages` variable of a chat template that renders tools: each turn's
// role and content, an assistant turn's tool_calls with their arguments as
// objects (as transformers' templates index them), a tool turn's
// tool_call_id.
nlohmann::ordered_json MessagesJson(absl::Span<const ChatMessage> messages);

}  // namespace kvjit::serve

#endif  // KVJIT_TOOLS_SERVE_TOOLPROMPT_H_
