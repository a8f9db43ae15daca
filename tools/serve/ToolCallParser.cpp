#include "tools/serve/ToolCallParser.h"

#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace kvjit::serve {
namespace {

using Json = nlohmann::ordered_json;

constexpr absl::string_view kHermesOpenTag = "<tool_call>";
constexpr absl::string_view kHermesCloseTag = "</tool_call>";
constexpr absl::string_view kLlamaPythonTag = "<|python_tag|>";
constexpr absl::string_view kMistralToolCallsTag = "[TOOL_CALLS]";

// The marker that starts calls amid content; kLlama3Json's calls can only
// start the reply, so it has none.
absl::string_view ContentCallMarker(ToolCallFormat format) {
  switch (format) {
    case ToolCallFormat::kHermes:
      return kHermesOpenTag;
    case ToolCallFormat::kLlama3Json:
      return "";
    case ToolCallFormat::kMistral:
      return kMistralToolCallsTag;
  }
  return "";
}

// The character the call JSON starts with: one object, or Mistral's array.
char CallJsonOpener(ToolCallFormat format) {
  return format == ToolCallFormat::kMistral ? '[' : '{';
}

size_t FindNonSpace(absl::string_view text, size_t from) {
  for (size_t i = from; i < text.size(); ++i) {
    if (!absl::ascii_isspace(static_cast<unsigned char>(text[i]))) return i;
  }
  return std::string::npos;
}

// Whether `text` could still grow into `marker` (it is shorter and matches).
bool CouldBecome(absl::string_view text, absl::string_view marker) {
  return text.size() < marker.size() && absl::StartsWith(marker, text);
}

// The length of the longest tail of `text` that could grow into `marker`.
size_t TailThatCouldBecome(absl::string_view text, absl::string_view marker) {
  if (marker.empty()) return 0;
  for (size_t length = std::min(text.size(), marker.size() - 1); length > 0; --length) {
    if (absl::StartsWith(marker, text.substr(text.size() - length))) return length;
  }
  return 0;
}

// The length of an unfinished UTF-8 character at the end of `text`, which a
// stream must not split: clients decode each chunk on its own.
size_t UnfinishedUtf8Tail(absl::string_view text) {
  for (size_t length = 1; length <= std::min<size_t>(3, text.size()); ++length) {
    const auto byte = static_cast<unsigned char>(text[text.size() - length]);
    if ((byte & 0xC0) == 0x80) continue;  // a continuation byte: look further back
    if (byte < 0xC0) return 0;
    const size_t character_length = byte >= 0xF0 ? 4 : byte >= 0xE0 ? 3 : 2;
    return character_length > length ? length : 0;
  }
  return 0;
}

std::string CompactJson(const Json& json) {
  // Models can write invalid UTF-8 in a string; a call is still better than
  // an exception.
  return json.dump(-1, ' ', /*ensure_ascii=*/false, Json::error_handler_t::replace);
}

// One call object: {"name": "f", "arguments": {...}}, where Llama writes
// "parameters" and some models write the arguments as a JSON string.
std::optional<ParsedToolCall> CallFromJson(const Json& call) {
  // find() on anything but an object gives end(): not a call.
  const auto name = call.find("name");
  if (name == call.end() || !name->is_string() || name->get_ref<const std::string&>().empty()) {
    return std::nullopt;
  }
  auto arguments = call.find("arguments");
  if (arguments == call.end()) arguments = call.find("parameters");

  ParsedToolCall parsed{name->get<std::string>(), "{}"};
  if (arguments == call.end() || arguments->is_null()) return parsed;
  if (arguments->is_object()) {
    parsed.arguments = CompactJson(*arguments);
    return parsed;
  }
  if (!arguments->is_string()) return std::nullopt;
  const Json unquoted = Json::parse(arguments->get_ref<const std::string&>(), nullptr,
                                    /*allow_exceptions=*/false);
  if (!unquoted.is_object()) return std::nullopt;  // a discarded parse is not an object
  parsed.arguments = CompactJson(unquoted);
  return parsed;
}

// The calls `json_text` holds, or nullopt when it is not calls: any part
// that is not a call makes the whole text content.
std::optional<std::vector<ParsedToolCall>> CallsFromJson(ToolCallFormat format,
                                                         absl::string_view json_text) {
  // A parse error gives a discarded value, neither object nor array.
  const Json json = Json::parse(json_text.begin(), json_text.end(), nullptr,
                                /*allow_exceptions=*/false);
  std::vector<ParsedToolCall> calls;
  if (format == ToolCallFormat::kMistral) {
    if (!json.is_array() || json.empty()) return std::nullopt;
    for (const Json& element : json) {
      std::optional<ParsedToolCall> call = CallFromJson(element);
      if (!call) return std::nullopt;
      calls.push_back(*std::move(call));
    }
    return calls;
  }
  std::optional<ParsedToolCall> call = CallFromJson(json);
  if (!call) return std::nullopt;
  calls.push_back(*std::move(call));
  return calls;
}

}  // namespace

absl::string_view ToolCallFormatName(ToolCallFormat format) {
  switch (format) {
    case ToolCallFormat::kHermes:
      return "hermes";
    case ToolCallFormat::kLlama3Json:
      return "llama3_json";
    case ToolCallFormat::kMistral:
      return "mistral";
  }
  return "unknown";
}

ParsedReply ParseToolCalls(ToolCallFormat format, absl::string_view reply) {
  ToolCallStreamParser parser(format);
  ToolCallStreamParser::Update pushed = parser.Push(reply);
  ToolCallStreamParser::Update finished = parser.Finish();
  ParsedReply parsed{std::move(pushed.content), std::move(pushed.tool_calls)};
  parsed.content += finished.content;
  for (ParsedToolCall& call : finished.tool_calls) parsed.tool_calls.push_back(std::move(call));
  return parsed;
}

ToolCallStreamParser::ToolCallStreamParser(ToolCallFormat format)
    : format_(format),
      mode_(format == ToolCallFormat::kHermes ? Mode::kContent : Mode::kReplyStart) {}

ToolCallStreamParser::Update ToolCallStreamParser::Push(absl::string_view text) {
  held_.append(text.data(), text.size());
  while (Step(/*at_end=*/false)) {
  }
  return TakeUpdate();
}

ToolCallStreamParser::Update ToolCallStreamParser::Finish() {
  while (Step(/*at_end=*/true)) {
  }
  if (call_was_last_) absl::StripTrailingAsciiWhitespace(&unreleased_content_);
  update_.content += unreleased_content_;
  unreleased_content_.clear();
  return TakeUpdate();
}

bool ToolCallStreamParser::Step(bool at_end) {
  switch (mode_) {
    case Mode::kReplyStart:
      return StepReplyStart(at_end);
    case Mode::kContent:
      return StepContent(at_end);
    case Mode::kCall:
      return StepCall(at_end);
    case Mode::kBetweenCalls:
      return StepBetweenCalls(at_end);
  }
  return false;
}

bool ToolCallStreamParser::StepReplyStart(bool at_end) {
  const size_t first = FindNonSpace(held_, 0);
  if (first == std::string::npos) {
    if (!at_end) return false;
    mode_ = Mode::kContent;
    return true;
  }
  const absl::string_view start = absl::string_view(held_).substr(first);
  if (format_ == ToolCallFormat::kLlama3Json) {
    if (absl::StartsWith(start, kLlamaPythonTag)) {
      EnterCall(first + kLlamaPythonTag.size());
      return true;
    }
    if (!at_end && CouldBecome(start, kLlamaPythonTag)) return false;
    if (start.front() == '{') {
      EnterCall(first);
      return true;
    }
    mode_ = Mode::kContent;
    return true;
  }
  // kMistral: "[TOOL_CALLS]" is left to kContent to find; here only an array
  // of objects without it, "[" then "{", starts calls.
  if (start.front() == '[') {
    const size_t element = FindNonSpace(held_, first + 1);
    if (element == std::string::npos && !at_end) return false;
    if (element != std::string::npos && held_[element] == '{') {
      EnterCall(first);
      return true;
    }
  }
  mode_ = Mode::kContent;
  return true;
}

bool ToolCallStreamParser::StepContent(bool at_end) {
  if (held_.empty()) return false;
  const absl::string_view marker = ContentCallMarker(format_);
  const size_t found =
      marker.empty() ? std::string::npos : held_.find(marker.data(), 0, marker.size());
  if (found != std::string::npos) {
    ReleaseContent(absl::string_view(held_).substr(0, found));
    held_.erase(0, found);
    EnterCall(marker.size());
    return true;
  }
  const size_t kept = at_end ? 0 : TailThatCouldBecome(held_, marker);
  ReleaseContent(absl::string_view(held_).substr(0, held_.size() - kept));
  held_.erase(0, held_.size() - kept);
  return false;
}

void ToolCallStreamParser::EnterCall(size_t json_search_from) {
  mode_ = Mode::kCall;
  marker_end_ = json_search_from;
  json_begin_ = std::string::npos;
  json_end_ = std::string::npos;
  json_scan_ = JsonScan{};
}

bool ToolCallStreamParser::StepCall(bool at_end) {
  if (json_begin_ == std::string::npos) {
    const size_t first = FindNonSpace(held_, marker_end_);
    if (first == std::string::npos) return at_end ? FailCall() : false;
    if (held_[first] != CallJsonOpener(format_)) return FailCall();
    json_begin_ = first;
    json_scan_.scanned = first;
  }
  // The JSON ends where its brackets balance, outside strings: a "}" or a
  // "</tool_call>" inside an argument's string does not end the call.
  JsonScan& scan = json_scan_;
  for (; json_end_ == std::string::npos && scan.scanned < held_.size(); ++scan.scanned) {
    const char c = held_[scan.scanned];
    if (scan.in_string) {
      if (scan.escaped) {
        scan.escaped = false;
      } else if (c == '\\') {
        scan.escaped = true;
      } else if (c == '"') {
        scan.in_string = false;
      }
    } else if (c == '"') {
      scan.in_string = true;
    } else if (c == '{' || c == '[') {
      ++scan.depth;
    } else if ((c == '}' || c == ']') && --scan.depth == 0) {
      json_end_ = scan.scanned + 1;
    }
  }
  if (json_end_ == std::string::npos) return at_end ? FailCall() : false;

  size_t call_end = json_end_;
  if (format_ == ToolCallFormat::kHermes) {
    const size_t after_json = FindNonSpace(held_, json_end_);
    const absl::string_view closing =
        after_json == std::string::npos ? "" : absl::string_view(held_).substr(after_json);
    if (absl::StartsWith(closing, kHermesCloseTag)) {
      call_end = after_json + kHermesCloseTag.size();
    } else if (at_end && closing.empty()) {
      // A reply cut at the closing tag (a stop string, a token limit right
      // after the JSON) still made its call.
      call_end = held_.size();
    } else if (!at_end && CouldBecome(closing, kHermesCloseTag)) {
      return false;
    } else {
      return FailCall();
    }
  }
  std::optional<std::vector<ParsedToolCall>> calls =
      CallsFromJson(format_, absl::string_view(held_).substr(json_begin_, json_end_ - json_begin_));
  if (!calls) return FailCall();
  ReleaseCalls(*std::move(calls));
  held_.erase(0, call_end);
  mode_ = format_ == ToolCallFormat::kLlama3Json ? Mode::kBetweenCalls : Mode::kContent;
  return true;
}

bool ToolCallStreamParser::FailCall() {
  // Only the marker is content for sure: the text after it may hold the next
  // marker. (kLlama3Json has no markers, so all the rest is content.)
  ReleaseContent(absl::string_view(held_).substr(0, marker_end_));
  held_.erase(0, marker_end_);
  mode_ = Mode::kContent;
  return true;
}

bool ToolCallStreamParser::StepBetweenCalls(bool at_end) {
  // Anything but `;` and another call makes the rest of the reply content.
  const size_t separator = FindNonSpace(held_, 0);
  if (separator == std::string::npos && !at_end) return false;
  if (separator != std::string::npos && held_[separator] == ';') {
    EnterCall(separator + 1);
  } else {
    mode_ = Mode::kContent;
  }
  return true;
}

void ToolCallStreamParser::ReleaseContent(absl::string_view text) {
  unreleased_content_.append(text.data(), text.size());
  size_t releasable = unreleased_content_.size();
  while (releasable > 0 &&
         absl::ascii_isspace(static_cast<unsigned char>(unreleased_content_[releasable - 1]))) {
    --releasable;
  }
  if (releasable == unreleased_content_.size()) {
    releasable -= UnfinishedUtf8Tail(unreleased_content_);
  }
  if (releasable == 0) return;
  update_.content.append(unreleased_content_, 0, releasable);
  unreleased_content_.erase(0, releasable);
  call_was_last_ = false;
}

void ToolCallStreamParser::ReleaseCalls(std::vector<ParsedToolCall> calls) {
  // What is held back now is whitespace before the call, dropped, or the
  // start of a character the model never finished, kept.
  absl::StripTrailingAsciiWhitespace(&unreleased_content_);
  update_.content += unreleased_content_;
  unreleased_content_.clear();
  for (ParsedToolCall& call : calls) update_.tool_calls.push_back(std::move(call));
  call_was_last_ = true;
}

ToolCallStreamParser::Update ToolCallStreamParser::TakeUpdate() {
  Update update = std::move(update_);
  update_ = Update{};
  return update;
}

}  // namespace kvjit::serve
