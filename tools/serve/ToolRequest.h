#ifndef KVJIT_TOOLS_SERVE_TOOLREQUEST_H_
#define KVJIT_TOOLS_SERVE_TOOLREQUEST_H_

#include <string>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace kvjit::serve {

// The functions a chat request offers the model (OpenAI's `tools`,
// `tool_choice` and `parallel_tool_calls`).
struct ToolRequest {
  enum class Choice {
    kAuto,      // the model may answer or call functions
    kNone,      // the model answers: the tools are neither shown nor parsed
    kRequired,  // the model calls one or more of the functions
    kNamed,     // the model calls `named_function`
  };
  // The request's list as sent, each {"type": "function", "function":
  // {"name", "description", "parameters"}}, keys in the client's order (the
  // chat template renders it).
  nlohmann::ordered_json tools = nlohmann::ordered_json::array();
  Choice choice = Choice::kAuto;
  std::string named_function;
  bool parallel_tool_calls = true;

  // Tools are offered: shown to the model and its reply parsed for calls.
  bool active() const { return !tools.empty() && choice != Choice::kNone; }
};

// Reads a chat request's tool fields from its body, read as ordered JSON (the
// template renders the tools in the client's key order). An error
// names the field: a tool that is not a function with a name (letters,
// digits, _ and -, at most 64) and an object schema for parameters, two
// tools of one name, a tool_choice that is none of auto, none, required or
// {"type": "function", "function": {"name"}} naming a tool, or tools sent to
// /v1/completions (`chat` false).
absl::StatusOr<ToolRequest> ReadToolRequest(const nlohmann::ordered_json& body, bool chat);

}  // namespace kvjit::serve

#endif  // KVJIT_TOOLS_SERVE_TOOLREQUEST_H_
