#ifndef KVJIT_TOOLS_SERVE_TOOLCALLPARSER_H_
#define KVJIT_TOOLS_SERVE_TOOLCALLPARSER_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace kvjit::serve {

// How a model family writes the tool calls in its reply:
// - kHermes (Qwen2.5/Qwen3, NousResearch Hermes, and the fallback for chat
//   templates without tools): `<tool_call>{"name": ..., "arguments": {...}}
//   </tool_call>` blocks, after any content.
// - kLlama3Json (Llama 3.1/3.2): the whole reply, after an optional
//   `<|python_tag|>`, is `{"name": ..., "parameters": {...}}` objects
//   separated by `;`.
// - kMistral: `[TOOL_CALLS]` then a JSON array of {"name", "arguments"}
//   objects, after any content; the marker is a control token that decoding
//   may drop, so a reply that starts with such an array is calls too.
enum class ToolCallFormat { kHermes, kLlama3Json, kMistral };

// vLLM's --tool-call-parser name: "hermes", "llama3_json", "mistral".
absl::string_view ToolCallFormatName(ToolCallFormat format);

struct ParsedToolCall {
  std::string name;
  // The arguments object as compact JSON text, its keys in the model's order;
  // "{}" when the call has none.
  std::string arguments;
};

struct ParsedReply {
  // The text that is not tool calls. Whitespace just before a call is dropped,
  // and so is whitespace between the last call and the end of the reply.
  std::string content;
  std::vector<ParsedToolCall> tool_calls;
};

// A finished reply's text split into content and calls. Text that looks like
// a call but is not one (bad JSON, no name) stays content, verbatim.
ParsedReply ParseToolCalls(ToolCallFormat format, absl::string_view reply);

// ParseToolCalls on a reply as it streams. Content is released as soon as it
// cannot be part of a call, except that it holds back a tail that could
// begin a call marker, trailing whitespace (dropped if a call follows), and
// an unfinished UTF-8 character. A call is released whole once its closing
// text arrives. For kLlama3Json and for kMistral's bare array the reply's
// start decides: text that could still open a call is held until it is one
// or cannot be. Whatever the chunks, the updates' content concatenated and
// their calls in order equal ParseToolCalls on the whole reply.
class ToolCallStreamParser {
 public:
  explicit ToolCallStreamParser(ToolCallFormat format);

  struct Update {
    std::string content;
    std::vector<ParsedToolCall> tool_calls;
  };

  Update Push(absl::string_view text);
  // The end of the reply: releases what was held (a call left unfinished is
  // content). Called once, after the last Push.
  Update Finish();

 private:
  enum class Mode {
    // kLlama3Json and kMistral: nothing yet shows whether the reply is calls.
    kReplyStart,
    // Content, with call markers searched for (kLlama3Json has none).
    kContent,
    // `held_` holds a call's marker and the call's text as it arrives.
    kCall,
    // kLlama3Json: after a call, awaiting `;` and the next call.
    kBetweenCalls,
  };

  // Makes one decision on `held_`; false when none can be made until more
  // text arrives (or, at the end, none is left to make).
  bool Step(bool at_end);
  bool StepReplyStart(bool at_end);
  bool StepContent(bool at_end);
  bool StepCall(bool at_end);
  bool StepBetweenCalls(bool at_end);

  // Starts a call whose JSON is the first non-whitespace at or after
  // `held_[json_search_from]`.
  void EnterCall(size_t json_search_from);
  // The call in `held_` is not one: its text becomes content.
  bool FailCall();

  void ReleaseContent(absl::string_view text);
  void ReleaseCalls(std::vector<ParsedToolCall> calls);
  Update TakeUpdate();

  ToolCallFormat format_;
  Mode mode_;
  // Text received and not yet decided on.
  std::string held_;

  // kCall: where the JSON is searched for in `held_` (after the marker), and
  // what becomes content if the call fails.
  size_t marker_end_ = 0;
  // kCall: the JSON's first character and one past its last in `held_`,
  // npos until seen.
  size_t json_begin_;
  size_t json_end_;
  // kCall: how far the JSON has been scanned for its end, so that each Push
  // scans only the new text.
  struct JsonScan {
    size_t scanned = 0;
    int depth = 0;
    bool in_string = false;
    bool escaped = false;
  };
  JsonScan json_scan_;

  // Content decided on but held back: trailing whitespace that a following
  // call drops, or an unfinished UTF-8 character.
  std::string unreleased_content_;
  // Whether a call came after the last non-whitespace content, so that
  // whitespace at the end of the reply is dropped.
  bool call_was_last_ = false;

  Update update_;
};

}  // namespace kvjit::serve

#endif  // KVJIT_TOOLS_SERVE_TOOLCALLPARSER_H_
