#ifndef KVJIT_TOOLS_SERVE_TOOLCALLGRAMMAR_H_
#define KVJIT_TOOLS_SERVE_TOOLCALLGRAMMAR_H_

#include "runtime/grammar/GrammarSpec.h"
#include "tools/serve/ToolCallParser.h"
#include "tools/serve/ToolRequest.h"

namespace kvjit::serve {

// Most calls one reply may make with parallel_tool_calls: a bound, so that
// the grammar stays small (OpenAI sets none).
inline constexpr int kMaxParallelToolCalls = 8;

// What a reply must be when `tools.choice` forces a call (required, or a
// named function): calls in `format` of the offered functions (only the
// named one), each with arguments valid under its parameters schema: one
// call of a named function, up to kMaxParallelToolCalls of any offered one
// with required and parallel_tool_calls.
grammar::GrammarSpec ForcedToolCallGrammar(const ToolRequest& tools, ToolCallFormat format);

}  // namespace kvjit::serve

#endif  // KVJIT_TOOLS_SERVE_TOOLCALLGRAMMAR_H_
