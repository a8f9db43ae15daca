#include "tools/serve/ToolCallGrammar.h"

#include <string>
#include <utility>

#include "nlohmann/json.hpp"

namespace kvjit::serve {

grammar::GrammarSpec ForcedToolCallGrammar(const ToolRequest& tools, ToolCallFormat format) {
  using Json = nlohmann::ordered_json;
  // Llama 3's JSON calls name their arguments "parameters".
  const char* arguments_key = format == ToolCallFormat::kLlama3Json ? "parameters" : "arguments";
  Json calls = Json::array();
  for (const Json& tool : tools.tools) {
    const Json& function = tool.at("function");
    const std::string name = function.at("name").get<std::string>();
    if (tools.choice == ToolRequest::Choice::kNamed && name != tools.named_function) continue;
    Json parameters = function.value("parameters", Json{{"type", "object"}});
    calls.push_back({{"type", "object"},
                     {"properties", {{"name", {{"const", name}}}, {arguments_key, std::move(parameters)}}},
                     {"required", {"name", arguments_key}}});
  }
  const Json call = calls.size() == 1 ? calls.front() : Json{{"anyOf", std::move(calls)}};
  // A named function is called once, as OpenAI's tool_choice means it.
  const int most_calls =
      tools.parallel_tool_calls && tools.choice == ToolRequest::Choice::kRequired
          ? kMaxParallelToolCalls
          : 1;

  grammar::GrammarSpec spec;
  spec.kind = grammar::GrammarSpec::Kind::kTaggedJson;
  switch (format) {
    case ToolCallFormat::kHermes:
      spec.text = call.dump();
      spec.prefix = "<tool_call>\n";
      spec.suffix = "\n</tool_call>";
      spec.separator = "\n";
      spec.max_repeats = most_calls;
      break;
    case ToolCallFormat::kLlama3Json:
      spec.text = call.dump();
      spec.separator = "; ";
      spec.max_repeats = most_calls;
      break;
    case ToolCallFormat::kMistral:
      spec.text = Json{{"type", "array"}, {"items", call}, {"minItems", 1}, {"maxItems", most_calls}}
                      .dump();
      spec.prefix = "[TOOL_CALLS]";
      break;
  }
  return spec;
}

}  // namespace kvjit::serve
