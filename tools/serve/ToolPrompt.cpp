#include "tools/serve/ToolPrompt.h"

#include <string>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace kvjit::serve {
namespace {

using Json = nlohmann::ordered_json;

// A call as the Hermes format writes it: {"name": ..., "arguments": {...}}.
std::string HermesCall(const ChatToolCall& call) {
  Json arguments = Json::parse(call.arguments, nullptr, /*allow_exceptions=*/false);
  if (arguments.is_discarded()) arguments = Json::object();
  return absl::StrCat("<tool_call>\n", Json{{"name", call.name}, {"arguments", arguments}}.dump(),
                      "\n</tool_call>");
}

std::string ToolInstructions(const Json& tools) {
  std::string text =
      "You can call functions to help with the request. Each function is described by a JSON "
      "signature inside <tools></tools>:\n<tools>";
  for (const Json& tool : tools) absl::StrAppend(&text, "\n", tool.dump());
  absl::StrAppend(&text,
                  "\n</tools>\nTo call a function, reply with a <tool_call></tool_call> block "
                  "holding a JSON object of the function's name and its arguments, one block per "
                  "call:\n<tool_call>\n{\"name\": \"<function name>\", \"arguments\": {<the "
                  "arguments>}}\n</tool_call>");
  return text;
}

}  // namespace

ToolTemplateSupport DetectToolSupport(absl::string_view template_source) {
  if (absl::StrContains(template_source, "<tool_call>")) {
    return {true, ToolCallFormat::kHermes};
  }
  if (absl::StrContains(template_source, "[TOOL_CALLS]")) {
    return {true, ToolCallFormat::kMistral};
  }
  if (absl::StrContains(template_source, "<|python_tag|>") ||
      absl::StrContains(template_source, "\"parameters\": dictionary of argument name")) {
    return {true, ToolCallFormat::kLlama3Json};
  }
  return {false, ToolCallFormat::kHermes};
}

std::vector<ChatMessage> WithToolsInText(absl::Span<const ChatMessage> messages,
                                         const nlohmann::ordered_json& tools) {
  std::vector<ChatMessage> rewritten;
  for (const ChatMessage& message : messages) {
    if (message.role == "tool") {
      const std::string response =
          absl::StrCat("<tool_response>\n", message.content, "\n</tool_response>");
      // Tool results of one assistant turn share a user turn.
      if (!rewritten.empty() && rewritten.back().role == "user" &&
          absl::StartsWith(rewritten.back().content, "<tool_response>")) {
        absl::StrAppend(&rewritten.back().content, "\n", response);
      } else {
        rewritten.push_back({"user", response});
      }
      continue;
    }
    ChatMessage plain{message.role, message.content};
    for (const ChatToolCall& call : message.tool_calls) {
      if (!plain.content.empty()) plain.content += "\n";
      plain.content += HermesCall(call);
    }
    rewritten.push_back(std::move(plain));
  }
  if (tools.empty()) return rewritten;
  const std::string instructions = ToolInstructions(tools);
  if (!rewritten.empty() && rewritten.front().role == "system") {
    absl::StrAppend(&rewritten.front().content, "\n\n", instructions);
    return rewritten;
  }
  for (ChatMessage& message : rewritten) {
    if (message.role != "user") continue;
    message.content = absl::StrCat(instructions, "\n\n", message.content);
    return rewritten;
  }
  rewritten.insert(rewritten.begin(), ChatMessage{"user", instructions});
  return rewritten;
}

Json MessagesJson(absl::Span<const ChatMessage> messages) {
  Json list = Json::array();
  for (const ChatMessage& message : messages) {
    Json entry = {{"role", message.role}, {"content", message.content}};
    if (!message.tool_calls.empty()) {
      Json calls = Json::array();
      for (const ChatToolCall& call : message.tool_calls) {
        Json arguments = Json::parse(call.arguments, nullptr, /*allow_exceptions=*/false);
        if (arguments.is_discarded()) arguments = Json::object();
        calls.push_back({{"id", call.id},
                         {"type", "function"},
                         {"function", {{"name", call.name}, {"arguments", std::move(arguments)}}}});
      }
      entry["tool_calls"] = std::move(calls);
    }
    if (message.role == "tool") entry["tool_call_id"] = message.tool_call_id;
    list.push_back(std::move(entry));
  }
  return list;
}

}  // namespace kvjit::serve
