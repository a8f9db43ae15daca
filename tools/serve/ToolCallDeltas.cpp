#include "tools/serve/ToolCallDeltas.h"

#include <random>
#include <string>
#include <utility>

#include "absl/strings/str_format.h"

namespace kvjit::serve {
namespace {

// "call_" and 24 hex digits, as unlikely to repeat as OpenAI's ids; for
// Mistral's format 9 letters and digits, the only ids its chat template
// takes back.
std::string NewCallId(ToolCallFormat format) {
  thread_local std::mt19937_64 random(std::random_device{}());
  if (format == ToolCallFormat::kMistral) {
    constexpr char kAlphabet[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    std::string id(9, ' ');
    for (char& c : id) c = kAlphabet[random() % (sizeof(kAlphabet) - 1)];
    return id;
  }
  return absl::StrFormat("call_%016x%08x", random(), static_cast<uint32_t>(random()));
}

}  // namespace

ToolCallDeltas::ToolCallDeltas(ToolCallFormat format, int64_t num_choices) : format_(format) {
  choices_.reserve(static_cast<size_t>(num_choices));
  for (int64_t i = 0; i < num_choices; ++i) choices_.push_back({ToolCallStreamParser(format), 0});
}

void ToolCallDeltas::AddCalls(Choice& choice, std::vector<ParsedToolCall> parsed,
                              ChoiceDelta& delta) {
  for (ParsedToolCall& call : parsed) {
    delta.tool_calls.push_back(
        {choice.calls++, NewCallId(format_), std::move(call.name), std::move(call.arguments)});
  }
}

ChoiceDelta ToolCallDeltas::Transform(ChoiceDelta delta) {
  if (delta.index < 0 || static_cast<size_t>(delta.index) >= choices_.size()) return delta;
  Choice& choice = choices_[static_cast<size_t>(delta.index)];
  ToolCallStreamParser::Update update = choice.parser.Push(delta.text);
  delta.text = std::move(update.content);
  AddCalls(choice, std::move(update.tool_calls), delta);
  if (delta.finish) {
    ToolCallStreamParser::Update rest = choice.parser.Finish();
    delta.text += rest.content;
    AddCalls(choice, std::move(rest.tool_calls), delta);
    if (*delta.finish == ChoiceFinish::kStop && choice.calls > 0) {
      delta.finish = ChoiceFinish::kToolCalls;
    }
  }
  return delta;
}

}  // namespace kvjit::serve
