#ifndef KVJIT_TOOLS_SERVE_TOOLCALLDELTAS_H_
#define KVJIT_TOOLS_SERVE_TOOLCALLDELTAS_H_

#include <cstdint>
#include <vector>

#include "tools/serve/RequestStream.h"
#include "tools/serve/ToolCallParser.h"

namespace kvjit::serve {

// Splits the deltas of a chat request that offered tools into content and
// tool calls, choice by choice, as the replies stream (ToolCallStreamParser):
// each call is reported whole, with an id of its own, once its closing text
// arrives; a choice that called functions and then stopped finishes with
// "tool_calls". The HTTP thread answering the request owns it.
class ToolCallDeltas {
 public:
  ToolCallDeltas(ToolCallFormat format, int64_t num_choices);

  ChoiceDelta Transform(ChoiceDelta delta);

 private:
  struct Choice {
    ToolCallStreamParser parser;
    int64_t calls = 0;
  };

  void AddCalls(Choice& choice, std::vector<ParsedToolCall> parsed, ChoiceDelta& delta);

  ToolCallFormat format_;
  std::vector<Choice> choices_;
};

}  // namespace kvjit::serve

#endif  // KVJIT_TOOLS_SERVE_TOOLCALLDELTAS_H_
