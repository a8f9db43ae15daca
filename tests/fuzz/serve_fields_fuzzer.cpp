// What clients and models send the server, fuzzed: the input is read as a
// request body by the structured-output and tool readers (any outcome but a
// crash is fine; what they accept must make a grammar whose schema is JSON),
// and as a model's reply by the tool-call parser of every format, whole and
// streamed in two chunks cut where the first byte says: both must give the
// same content and calls, the calls' arguments JSON objects.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <string>

#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "tools/serve/StructuredOutputRequest.h"
#include "tools/serve/ToolCallGrammar.h"
#include "tools/serve/ToolCallParser.h"
#include "tools/serve/ToolRequest.h"

namespace {

using kvjit::serve::ToolCallFormat;

void Fail(const char* what) {
  std::fprintf(stderr, "serve_fields_fuzzer: %s\n", what);
  std::abort();
}

void CheckReply(ToolCallFormat format, const std::string& text) {
  const kvjit::serve::ParsedReply whole = kvjit::serve::ParseToolCalls(format, text);
  for (const kvjit::serve::ParsedToolCall& call : whole.tool_calls) {
    if (call.name.empty()) Fail("a call without a name");
    if (!nlohmann::json::parse(call.arguments, nullptr, false).is_object()) {
      Fail("a call's arguments are not a JSON object");
    }
  }
  const size_t cut = text.empty() ? 0 : static_cast<unsigned char>(text[0]) % (text.size() + 1);
  kvjit::serve::ToolCallStreamParser stream(format);
  kvjit::serve::ToolCallStreamParser::Update first = stream.Push(absl::string_view(text).substr(0, cut));
  kvjit::serve::ToolCallStreamParser::Update second = stream.Push(absl::string_view(text).substr(cut));
  kvjit::serve::ToolCallStreamParser::Update last = stream.Finish();
  if (first.content + second.content + last.content != whole.content) {
    Fail("streamed content differs from the whole reply's");
  }
  size_t calls = first.tool_calls.size() + second.tool_calls.size() + last.tool_calls.size();
  if (calls != whole.tool_calls.size()) Fail("streamed calls differ from the whole reply's");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const nlohmann::ordered_json body =
      nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  (void)kvjit::serve::ReadStructuredOutput(body);
  for (const bool chat : {true, false}) {
    absl::StatusOr<kvjit::serve::ToolRequest> tools = kvjit::serve::ReadToolRequest(body, chat);
    if (!tools.ok() || !tools->active()) continue;
    for (const ToolCallFormat format :
         {ToolCallFormat::kHermes, ToolCallFormat::kLlama3Json, ToolCallFormat::kMistral}) {
      const kvjit::grammar::GrammarSpec spec = kvjit::serve::ForcedToolCallGrammar(*tools, format);
      if (!nlohmann::json::parse(spec.text, nullptr, false).is_object()) {
        Fail("a forced call's grammar schema is not a JSON object");
      }
    }
  }
  for (const ToolCallFormat format :
       {ToolCallFormat::kHermes, ToolCallFormat::kLlama3Json, ToolCallFormat::kMistral}) {
    CheckReply(format, text);
  }
  return 0;
}
