// Splitting model replies into content and OpenAI tool calls, whole and as
// they stream. Every reply a test parses is also streamed in chunks cut every
// way (Parse below), and the stream must agree with the whole-reply parse.

#include "tools/serve/ToolCallParser.h"

#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvjit::serve {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

MATCHER_P2(IsCall, name, arguments, "") {
  *result_listener << "call " << arg.name << "(" << arg.arguments << ")";
  return arg.name == name && arg.arguments == arguments;
}

bool IsValidUtf8(absl::string_view text) {
  for (size_t i = 0; i < text.size();) {
    const auto byte = static_cast<unsigned char>(text[i]);
    const size_t length = byte < 0x80    ? 1
                          : byte >= 0xF0 ? 4
                          : byte >= 0xE0 ? 3
                          : byte >= 0xC0 ? 2
                                         : 0;
    if (length == 0 || i + length > text.size()) return false;
    for (size_t k = 1; k < length; ++k) {
      if ((static_cast<unsigned char>(text[i + k]) & 0xC0) != 0x80) return false;
    }
    i += length;
  }
  return true;
}

// A parse flattened for comparing and printing.
struct Flat {
  std::string content;
  std::vector<std::pair<std::string, std::string>> calls;
  bool operator==(const Flat& other) const {
    return content == other.content && calls == other.calls;
  }
};

std::string Describe(const Flat& flat) {
  std::string text = absl::StrCat("content \"", flat.content, "\", calls [");
  for (const auto& [name, arguments] : flat.calls) absl::StrAppend(&text, name, arguments, " ");
  return absl::StrCat(text, "]");
}

void Append(Flat& flat, ToolCallStreamParser::Update update) {
  flat.content += update.content;
  for (ParsedToolCall& call : update.tool_calls) {
    flat.calls.emplace_back(std::move(call.name), std::move(call.arguments));
  }
}

// Streams `reply` cut at `cuts` (ascending offsets); empty when the stream
// agrees with `expected` and sent only whole UTF-8 characters, else what
// went wrong.
std::string StreamMismatch(ToolCallFormat format, absl::string_view reply,
                           const std::vector<size_t>& cuts, const Flat& expected) {
  ToolCallStreamParser parser(format);
  Flat streamed;
  std::string error;
  auto take = [&](ToolCallStreamParser::Update update) {
    if (error.empty() && IsValidUtf8(reply) && !IsValidUtf8(update.content)) {
      error =
          absl::StrCat("an update's content splits a UTF-8 character: \"", update.content, "\"");
    }
    Append(streamed, std::move(update));
  };
  size_t begin = 0;
  for (size_t cut : cuts) {
    take(parser.Push(reply.substr(begin, cut - begin)));
    begin = cut;
  }
  take(parser.Push(reply.substr(begin)));
  take(parser.Finish());
  if (error.empty() && !(streamed == expected)) {
    error = absl::StrCat("streamed ", Describe(streamed), "\nwhole    ", Describe(expected));
  }
  if (error.empty()) return "";
  std::string chunks = "chunks cut at";
  for (size_t cut : cuts) absl::StrAppend(&chunks, " ", cut);
  return absl::StrCat(chunks, ": ", error);
}

// Checks that streaming `reply` in chunks agrees with parsing it whole:
// cut once and twice at every pair of offsets, a byte at a time, and in
// random chunk sizes.
void ExpectStreamingAgrees(ToolCallFormat format, absl::string_view reply, const Flat& whole) {
  std::vector<std::vector<size_t>> cuttings;
  for (size_t first = 0; first <= reply.size(); ++first) {
    cuttings.push_back({first});
    for (size_t second = first; second <= reply.size(); ++second)
      cuttings.push_back({first, second});
  }
  std::vector<size_t> every_byte;
  for (size_t cut = 1; cut < reply.size(); ++cut) every_byte.push_back(cut);
  cuttings.push_back(every_byte);
  std::mt19937 random(static_cast<unsigned>(reply.size()));
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<size_t> cuts;
    for (size_t cut = 0; cut < reply.size();) {
      cut += std::uniform_int_distribution<size_t>(1, 12)(random);
      if (cut < reply.size()) cuts.push_back(cut);
    }
    cuttings.push_back(cuts);
  }
  for (const std::vector<size_t>& cuts : cuttings) {
    const std::string mismatch = StreamMismatch(format, reply, cuts, whole);
    if (!mismatch.empty()) {
      ADD_FAILURE() << ToolCallFormatName(format) << " reply \"" << reply << "\"\n" << mismatch;
      return;
    }
  }
}

// ParseToolCalls(format, reply), once streaming is checked to agree with it.
ParsedReply Parse(ToolCallFormat format, absl::string_view reply) {
  ParsedReply parsed = ParseToolCalls(format, reply);
  Flat whole{parsed.content, {}};
  for (const ParsedToolCall& call : parsed.tool_calls)
    whole.calls.emplace_back(call.name, call.arguments);
  ExpectStreamingAgrees(format, reply, whole);
  return parsed;
}

ParsedReply Hermes(absl::string_view reply) { return Parse(ToolCallFormat::kHermes, reply); }
ParsedReply Llama(absl::string_view reply) { return Parse(ToolCallFormat::kLlama3Json, reply); }
ParsedReply Mistral(absl::string_view reply) { return Parse(ToolCallFormat::kMistral, reply); }

// Replies stated as `reply` verbatim: all content, no calls.
void ExpectAllContent(ToolCallFormat format, absl::string_view reply) {
  const ParsedReply parsed = Parse(format, reply);
  EXPECT_EQ(parsed.content, reply) << ToolCallFormatName(format);
  EXPECT_THAT(parsed.tool_calls, IsEmpty()) << ToolCallFormatName(format) << " " << reply;
}

TEST(ToolCallFormatNameTest, NamesFormatsAsVllmDoes) {
  EXPECT_EQ(ToolCallFormatName(ToolCallFormat::kHermes), "hermes");
  EXPECT_EQ(ToolCallFormatName(ToolCallFormat::kLlama3Json), "llama3_json");
  EXPECT_EQ(ToolCallFormatName(ToolCallFormat::kMistral), "mistral");
}

// --- Hermes ---

TEST(HermesToolCallTest, ReadsOneCall) {
  const ParsedReply parsed = Hermes(
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": "
      "\"celsius\"}}\n</tool_call>");
  EXPECT_EQ(parsed.content, "");
  EXPECT_THAT(parsed.tool_calls,
              ElementsAre(IsCall("get_weather", R"({"city":"Paris","unit":"celsius"})")));
}

TEST(HermesToolCallTest, ReadsParallelCallsWhateverTheWhitespaceAroundThem) {
  const ParsedReply parsed = Hermes(
      "<tool_call>\n{\"name\": \"a\", \"arguments\": {\"x\": 1}}\n</tool_call>\n"
      "<tool_call>{\"name\": \"b\", \"arguments\": {\"y\": 2}}</tool_call>\n\n"
      "<tool_call>  \r\n{\"name\": \"c\", \"arguments\": {}} \t</tool_call>\n");
  EXPECT_EQ(parsed.content, "");
  EXPECT_THAT(parsed.tool_calls,
              ElementsAre(IsCall("a", R"({"x":1})"), IsCall("b", R"({"y":2})"), IsCall("c", "{}")));
}

TEST(HermesToolCallTest, TextBeforeTheCallsIsContentWithoutItsTrailingWhitespace) {
  const ParsedReply parsed = Hermes(
      "Let me check the weather for you.\n\n"
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
      "\"Paris\"}}\n</tool_call>\n"
      "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"zone\": \"CET\"}}\n</tool_call>\n");
  EXPECT_EQ(parsed.content, "Let me check the weather for you.");
  EXPECT_THAT(parsed.tool_calls, ElementsAre(IsCall("get_weather", R"({"city":"Paris"})"),
                                             IsCall("get_time", R"({"zone":"CET"})")));
}

TEST(HermesToolCallTest, TextBetweenAndAfterCallsIsContent) {
  const ParsedReply parsed = Hermes(
      "First:\n<tool_call>{\"name\": \"a\"}</tool_call>\nthen:\n"
      "<tool_call>{\"name\": \"b\"}</tool_call>\nDone.\n");
  EXPECT_EQ(parsed.content, "First:\nthen:\nDone.\n");
  EXPECT_THAT(parsed.tool_calls, ElementsAre(IsCall("a", "{}"), IsCall("b", "{}")));
}

TEST(HermesToolCallTest, PlainTextIsContentVerbatim) {
  ExpectAllContent(ToolCallFormat::kHermes, "Hello! How can I help you today?\n\n");
  ExpectAllContent(ToolCallFormat::kHermes,
                   "To call a tool, write a tool_call block; the closing tag is </tool_call>.");
  ExpectAllContent(ToolCallFormat::kHermes, "Write <tool_call> then JSON. Or <tool_ca");
  ExpectAllContent(ToolCallFormat::kHermes, "");
  ExpectAllContent(ToolCallFormat::kHermes, " \n ");
}

TEST(HermesToolCallTest, ABlockThatIsNotACallStaysContentVerbatim) {
  for (const char* reply : {
           "Sure.\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": }\n</tool_call>",
           "<tool_call>\n{\"arguments\": {\"x\": 1}}\n</tool_call>",           // no name
           "<tool_call>{\"name\": \"\", \"arguments\": {}}</tool_call>",       // empty name
           "<tool_call>{\"name\": 7, \"arguments\": {}}</tool_call>",          // name not a string
           "<tool_call>{\"name\": \"f\", \"arguments\": [1, 2]}</tool_call>",  // arguments an array
           "<tool_call>{\"name\": \"f\", \"arguments\": \"x=1\"}</tool_call>",  // string, not JSON
           "<tool_call>{\"name\": \"f\", \"arguments\": \"[1]\"}</tool_call>",  // string, no object
           "<tool_call>\nget_weather(city=\"Paris\")\n</tool_call>",
           "<tool_call>{\"name\": \"f\"} trailing</tool_call>",
           "<tool_call>{\"name\": \"f\", \"arguments\": {\"x\": 1}",  // unfinished at the end
           "<tool_call>\n",
           "<tool_call>[{\"name\": \"f\"}]</tool_call>",
       }) {
    ExpectAllContent(ToolCallFormat::kHermes, reply);
  }
}

TEST(HermesToolCallTest, AGoodCallAfterABadBlockIsStillACall) {
  const ParsedReply parsed = Hermes(
      "<tool_call>{oops}</tool_call>\n<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>");
  EXPECT_EQ(parsed.content, "<tool_call>{oops}</tool_call>");
  EXPECT_THAT(parsed.tool_calls, ElementsAre(IsCall("f", "{}")));
}

TEST(HermesToolCallTest, ACallAfterAnUnfinishedOneIsStillACall) {
  // The first call's JSON never ends, so only the end of the reply shows
  // that it is content and that the second call starts afresh.
  for (const char* unfinished : {"<tool_call>{\"name\": \"f\", \"arguments\": {\"x\": [",
                                 "<tool_call>{\"name\": \"f\", \"arguments\": {\"x\": \"a\\"}) {
    const ParsedReply parsed =
        Hermes(absl::StrCat(unfinished, "\n<tool_call>{\"name\": \"g\"}</tool_call>"));
    EXPECT_EQ(parsed.content, unfinished);
    EXPECT_THAT(parsed.tool_calls, ElementsAre(IsCall("g", "{}")));
  }
}

TEST(HermesToolCallTest, ReadsArgumentsWrittenAsAJsonString) {
  const ParsedReply parsed = Hermes(
      R"(<tool_call>{"name": "f", "arguments": "{\"q\": \"x\", \"n\": [1, 2]}"}</tool_call>)");
  EXPECT_THAT(parsed.tool_calls, ElementsAre(IsCall("f", R"({"q":"x","n":[1,2]})")));
}

TEST(HermesToolCallTest, ACallWithoutArgumentsHasAnEmptyObject) {
  EXPECT_THAT(Hermes(R"(<tool_call>{"name": "now"}</tool_call>)").tool_calls,
              ElementsAre(IsCall("now", "{}")));
  EXPECT_THAT(Hermes(R"(<tool_call>{"name": "now", "arguments": null}</tool_call>)").tool_calls,
              ElementsAre(IsCall("now", "{}")));
}

TEST(HermesToolCallTest, KeepsNestedArgumentsAndTheirKeyOrder) {
  const ParsedReply parsed = Hermes(
      "<tool_call>\n{\"name\": \"book\", \"arguments\": {\"zeta\": {\"b\": [1, {\"c\": null}], "
      "\"a\": true}, \"alpha\": \"caf\xC3\xA9 \xE6\x97\xA5\xE6\x9C\xAC \xF0\x9F\x99\x82\", "
      "\"escaped\": \"say \\\"hi\\\" \\\\ \\u00e9\", \"n\": -1.5e3}}\n</tool_call>");
  EXPECT_THAT(
      parsed.tool_calls,
      ElementsAre(IsCall("book",
                         "{\"zeta\":{\"b\":[1,{\"c\":null}],\"a\":true},"
                         "\"alpha\":\"caf\xC3\xA9 \xE6\x97\xA5\xE6\x9C\xAC \xF0\x9F\x99\x82\","
                         "\"escaped\":\"say \\\"hi\\\" \\\\ \xC3\xA9\",\"n\":-1500.0}")));
}

TEST(HermesToolCallTest, AClosingTagOrBraceInsideAStringDoesNotEndTheCall) {
  const ParsedReply parsed = Hermes(
      R"(<tool_call>{"name": "echo", "arguments": {"text": "a } ] </tool_call> <tool_call> \" }"}})"
      "\n</tool_call>");
  EXPECT_EQ(parsed.content, "");
  EXPECT_THAT(parsed.tool_calls,
              ElementsAre(IsCall("echo", R"({"text":"a } ] </tool_call> <tool_call> \" }"})")));
}

TEST(HermesToolCallTest, ACallCutOffBeforeItsClosingTagIsStillACall) {
  // A stop string of "</tool_call>" ends the reply there.
  const ParsedReply parsed =
      Hermes("Checking.\n<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n");
  EXPECT_EQ(parsed.content, "Checking.");
  EXPECT_THAT(parsed.tool_calls, ElementsAre(IsCall("f", "{}")));
}

TEST(HermesToolCallTest, StreamsContentAtOnceAndEachCallWhenItCloses) {
  ToolCallStreamParser parser(ToolCallFormat::kHermes);
  ToolCallStreamParser::Update update = parser.Push("Let me look");
  EXPECT_EQ(update.content, "Let me look");
  // The space might come before a call, which drops it; "<tool" might be one.
  update = parser.Push(" that up <tool");
  EXPECT_EQ(update.content, " that up");
  update = parser.Push("_call>\n{\"name\": \"f\", \"arguments\": {\"x\": 1}}\n</tool_cal");
  EXPECT_EQ(update.content, "");
  EXPECT_THAT(update.tool_calls, IsEmpty());
  update = parser.Push("l>\n<tool_call>{\"name\": \"g\"}</tool_call>");
  EXPECT_EQ(update.content, "");
  EXPECT_THAT(update.tool_calls, ElementsAre(IsCall("f", R"({"x":1})"), IsCall("g", "{}")));
  update = parser.Finish();
  EXPECT_EQ(update.content, "");
  EXPECT_THAT(update.tool_calls, IsEmpty());
}

TEST(HermesToolCallTest, StreamsTextThatLooksLikeATagOnceItIsNotOne) {
  ToolCallStreamParser parser(ToolCallFormat::kHermes);
  EXPECT_EQ(parser.Push("a <tool").content, "a");
  EXPECT_EQ(parser.Push("box> b").content, " <toolbox> b");
  EXPECT_EQ(parser.Push(" <tool_call>not json").content, " <tool_call>not json");
  EXPECT_EQ(parser.Finish().content, "");
}

TEST(HermesToolCallTest, StreamsMultibyteCharactersWhole) {
  const std::string reply =
      "Caf\xC3\xA9 \xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E \xF0\x9F\x99\x82!\n"
      "<tool_call>{\"name\": \"\xE5\xA4\xA9\xE6\xB0\x97\", \"arguments\": {\"city\": "
      "\"M\xC3\xBCnchen\"}}</tool_call>\n\xF0\x9F\x91\x8D";
  const ParsedReply parsed = Hermes(reply);  // checks every chunk's content is whole UTF-8
  EXPECT_EQ(parsed.content,
            "Caf\xC3\xA9 \xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E \xF0\x9F\x99\x82!\n\xF0\x9F\x91\x8D");
  EXPECT_THAT(parsed.tool_calls,
              ElementsAre(IsCall("\xE5\xA4\xA9\xE6\xB0\x97", "{\"city\":\"M\xC3\xBCnchen\"}")));

  ToolCallStreamParser parser(ToolCallFormat::kHermes);
  EXPECT_EQ(parser.Push("Caf\xC3").content, "Caf");
  EXPECT_EQ(parser.Push("\xA9\xF0\x9F").content, "\xC3\xA9");
  EXPECT_EQ(parser.Push("\x99\x82").content, "\xF0\x9F\x99\x82");
}

// --- Llama 3 JSON ---

TEST(Llama3JsonToolCallTest, ReadsOneCall) {
  const ParsedReply parsed =
      Llama(R"({"name": "get_weather", "parameters": {"city": "Paris", "days": 3}})");
  EXPECT_EQ(parsed.content, "");
  EXPECT_THAT(parsed.tool_calls,
              ElementsAre(IsCall("get_weather", R"({"city":"Paris","days":3})")));
}

TEST(Llama3JsonToolCallTest, ReadsACallAfterThePythonTagAndWhitespace) {
  const ParsedReply parsed =
      Llama("\n <|python_tag|>\n{\"name\": \"search\", \"parameters\": {\"q\": \"kvjit\"}}\n");
  EXPECT_EQ(parsed.content, "");
  EXPECT_THAT(parsed.tool_calls, ElementsAre(IsCall("search", R"({"q":"kvjit"})")));
}

TEST(Llama3JsonToolCallTest, ReadsParallelCallsSeparatedBySemicolons) {
  const ParsedReply parsed =
      Llama(R"({"name": "a", "parameters": {"x": 1}}; {"name": "b", "parameters": {}};)"
            "\n"
            R"({"type": "function", "name": "c", "arguments": {"y": [2]}})");
  EXPECT_EQ(parsed.content, "");
  EXPECT_THAT(parsed.tool_calls, ElementsAre(IsCall("a", R"({"x":1})"), IsCall("b", "{}"),
                                             IsCall("c", R"({"y":[2]})")));
}

TEST(Llama3JsonToolCallTest, AReplyThatDoesNotStartWithACallIsContent) {
  for (const char* reply : {
           "The weather in Paris is sunny.",
           "  Indented answer\n",
           "Sure: {\"name\": \"f\", \"parameters\": {}}",  // calls must start the reply
           "I would use a tool_call here, but none is needed.",
           "<|python_tag|>print(1 + 1)",  // the code interpreter, not JSON
           "<b>bold</b>",
           "",
       }) {
    ExpectAllContent(ToolCallFormat::kLlama3Json, reply);
  }
}

TEST(Llama3JsonToolCallTest, JsonThatIsNotACallIsContentVerbatim) {
  for (const char* reply : {
           R"({"answer": 42})",  // a JSON-mode answer
           R"({"name": "f", "parameters": {"x": })",
           R"({"name": "f", "parameters": {"x": 1})",  // unfinished at the end
           R"({"name": "f", "parameters": "not json"})",
           "<|python_tag|>{\"parameters\": {}}",
       }) {
    ExpectAllContent(ToolCallFormat::kLlama3Json, reply);
  }
}

TEST(Llama3JsonToolCallTest, TextAfterTheCallsIsContent) {
  ParsedReply parsed = Llama(R"(  {"name": "f"} and more)");
  EXPECT_EQ(parsed.content, " and more");
  EXPECT_THAT(parsed.tool_calls, ElementsAre(IsCall("f", "{}")));

  // Calls after the first need a `;` before them.
  parsed = Llama(R"({"name": "f"}, {"name": "g"})");
  EXPECT_EQ(parsed.content, R"(, {"name": "g"})");
  EXPECT_THAT(parsed.tool_calls, ElementsAre(IsCall("f", "{}")));

  parsed = Llama(R"({"name": "f"}; and more)");
  EXPECT_EQ(parsed.content, "; and more");
  EXPECT_THAT(parsed.tool_calls, ElementsAre(IsCall("f", "{}")));
}

TEST(Llama3JsonToolCallTest, ABadCallAfterGoodOnesIsContent) {
  const ParsedReply parsed =
      Llama(R"({"name": "a", "parameters": {}}; {"name": "b", "parameters": {"x": ]}})");
  EXPECT_EQ(parsed.content, R"(; {"name": "b", "parameters": {"x": ]}})");
  EXPECT_THAT(parsed.tool_calls, ElementsAre(IsCall("a", "{}")));
}

TEST(Llama3JsonToolCallTest, ReadsArgumentsWrittenAsAJsonString) {
  EXPECT_THAT(Llama(R"({"name": "f", "parameters": "{\"b\": 1, \"a\": 2}"})").tool_calls,
              ElementsAre(IsCall("f", R"({"b":1,"a":2})")));
}

TEST(Llama3JsonToolCallTest, KeepsNestedArguments) {
  const ParsedReply parsed = Llama(
      "<|python_tag|>{\"name\": \"plan\", \"parameters\": {\"stops\": [{\"city\": "
      "\"Z\xC3\xBCrich\", \"tags\": [\"\xF0\x9F\x8F\x94\", \"say \\\"hi\\\"\"]}], \"opts\": {}}}");
  EXPECT_THAT(
      parsed.tool_calls,
      ElementsAre(IsCall("plan",
                         "{\"stops\":[{\"city\":\"Z\xC3\xBCrich\",\"tags\":[\"\xF0\x9F\x8F\x94\","
                         "\"say \\\"hi\\\"\"]}],\"opts\":{}}")));
}

TEST(Llama3JsonToolCallTest, StreamsContentOnceTheStartRulesOutACall) {
  ToolCallStreamParser parser(ToolCallFormat::kLlama3Json);
  EXPECT_EQ(parser.Push("\n <|pyt").content, "");
  EXPECT_EQ(parser.Push("hon_tag|>{\"name\": \"f\", ").content, "");
  ToolCallStreamParser::Update update = parser.Push("\"parameters\": {}}; {\"name\"");
  EXPECT_EQ(update.content, "");
  EXPECT_THAT(update.tool_calls, ElementsAre(IsCall("f", "{}")));
  update = parser.Push(": \"g\"}");
  EXPECT_THAT(update.tool_calls, ElementsAre(IsCall("g", "{}")));
  update = parser.Finish();
  EXPECT_EQ(update.content, "");
  EXPECT_THAT(update.tool_calls, IsEmpty());

  ToolCallStreamParser plain(ToolCallFormat::kLlama3Json);
  EXPECT_EQ(plain.Push(" ").content, "");
  EXPECT_EQ(plain.Push(" It").content, "  It");
  EXPECT_EQ(plain.Push(" is {sunny}").content, " is {sunny}");
}

TEST(Llama3JsonToolCallTest, StreamsMultibyteCharactersWhole) {
  const ParsedReply parsed =
      Llama("\xC2\xBFQu\xC3\xA9 tal? \xE4\xBD\xA0\xE5\xA5\xBD \xF0\x9F\x98\x80");
  EXPECT_EQ(parsed.content, "\xC2\xBFQu\xC3\xA9 tal? \xE4\xBD\xA0\xE5\xA5\xBD \xF0\x9F\x98\x80");
  EXPECT_THAT(Llama("{\"name\": \"\xC3\xA9t\xC3\xA9\", \"parameters\": {\"\xF0\x9F\x98\x80\": 1}}")
                  .tool_calls,
              ElementsAre(IsCall("\xC3\xA9t\xC3\xA9", "{\"\xF0\x9F\x98\x80\":1}")));
}

// --- Mistral ---

TEST(MistralToolCallTest, ReadsOneCallAfterTheMarker) {
  const ParsedReply parsed =
      Mistral(R"([TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Paris"}}])");
  EXPECT_EQ(parsed.content, "");
  EXPECT_THAT(parsed.tool_calls, ElementsAre(IsCall("get_weather", R"({"city":"Paris"})")));
}

TEST(MistralToolCallTest, ReadsABareArrayOfCallsWhenDecodingDroppedTheMarker) {
  const ParsedReply parsed = Mistral("\n[ {\"name\": \"f\", \"arguments\": {\"x\": 1}}]\n");
  EXPECT_EQ(parsed.content, "");
  EXPECT_THAT(parsed.tool_calls, ElementsAre(IsCall("f", R"({"x":1})")));
}

TEST(MistralToolCallTest, ReadsParallelCalls) {
  const ParsedReply parsed = Mistral(
      R"([TOOL_CALLS][{"name": "a", "arguments": {"x": 1}}, {"name": "b", "arguments": {}},)"
      R"( {"name": "c", "arguments": {"z": [true]}}])");
  EXPECT_EQ(parsed.content, "");
  EXPECT_THAT(parsed.tool_calls, ElementsAre(IsCall("a", R"({"x":1})"), IsCall("b", "{}"),
                                             IsCall("c", R"({"z":[true]})")));
}

TEST(MistralToolCallTest, TextBeforeTheMarkerIsContent) {
  const ParsedReply parsed = Mistral(
      "I'll look that up.\n[TOOL_CALLS][{\"name\": \"search\", \"arguments\": {\"q\": \"x\"}}]\n"
      "[TOOL_CALLS][{\"name\": \"open\", \"arguments\": {\"id\": 3}}]");
  EXPECT_EQ(parsed.content, "I'll look that up.");
  EXPECT_THAT(parsed.tool_calls,
              ElementsAre(IsCall("search", R"({"q":"x"})"), IsCall("open", R"({"id":3})")));
}

TEST(MistralToolCallTest, PlainTextIsContentVerbatim) {
  for (const char* reply : {
           "The answer is 4.\n",
           "[1] Smith, J. (2020). A citation.",
           "[TOOL",
           "[ ",
           "Call tools with a tool_call; Mistral writes [TOOL_CALLS] first.",
           "[TOOL_CALLS] is the marker.",
           "",
       }) {
    ExpectAllContent(ToolCallFormat::kMistral, reply);
  }
}

TEST(MistralToolCallTest, AnArrayThatIsNotCallsStaysContentVerbatim) {
  for (const char* reply : {
           R"([TOOL_CALLS][{"name": "f", "arguments": {"x": }}])", R"([TOOL_CALLS][])",
           R"([TOOL_CALLS][{"name": "f"}, {"arguments": {}}])",  // one bad element spoils all
           R"([TOOL_CALLS]{"name": "f", "arguments": {}})",
           R"([TOOL_CALLS]get_weather[ARGS]{"city": "Paris"})", R"([{"answer": 42}])",
           R"([{"name": "f", "arguments": {"x": 1}})",         // unfinished at the end
           "Results: [{\"name\": \"f\", \"arguments\": {}}]",  // only the reply's start may omit
                                                               // the marker
       }) {
    ExpectAllContent(ToolCallFormat::kMistral, reply);
  }
}

TEST(MistralToolCallTest, ReadsArgumentsWrittenAsAJsonString) {
  EXPECT_THAT(Mistral(R"([TOOL_CALLS][{"name": "f", "arguments": "{\"k\": \"v\"}"}])").tool_calls,
              ElementsAre(IsCall("f", R"({"k":"v"})")));
}

TEST(MistralToolCallTest, KeepsNestedArguments) {
  const ParsedReply parsed = Mistral(
      "[TOOL_CALLS][{\"name\": \"put\", \"arguments\": {\"doc\": {\"title\": \"] [TOOL_CALLS] }\", "
      "\"body\": [\"\xD0\x9F\xD1\x80\xD0\xB8\xD0\xB2\xD0\xB5\xD1\x82\", {\"q\": \"a "
      "\\\"b\\\"\"}]}}}]");
  EXPECT_THAT(
      parsed.tool_calls,
      ElementsAre(IsCall("put",
                         "{\"doc\":{\"title\":\"] [TOOL_CALLS] }\",\"body\":[\"\xD0\x9F\xD1\x80"
                         "\xD0\xB8\xD0\xB2\xD0\xB5\xD1\x82\",{\"q\":\"a \\\"b\\\"\"}]}}")));
}

TEST(MistralToolCallTest, StreamsContentAtOnceAndCallsWhenTheArrayCloses) {
  ToolCallStreamParser parser(ToolCallFormat::kMistral);
  EXPECT_EQ(parser.Push("[").content, "");
  EXPECT_EQ(parser.Push("1] see ").content, "[1] see");
  EXPECT_EQ(parser.Push("below [TOOL_").content, " below");
  EXPECT_EQ(parser.Push("CALLS][{\"name\": \"f\"}").content, "");
  ToolCallStreamParser::Update update = parser.Push("]");
  EXPECT_EQ(update.content, "");
  EXPECT_THAT(update.tool_calls, ElementsAre(IsCall("f", "{}")));
  EXPECT_EQ(parser.Finish().content, "");
}

TEST(MistralToolCallTest, StreamsMultibyteCharactersWhole) {
  const ParsedReply parsed = Mistral(
      "\xE3\x81\x93\xE3\x82\x93\xE3\x81\xAB\xE3\x81\xA1\xE3\x81\xAF \xF0\x9F\x8C\x8D\n"
      "[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {\"t\": \"\xC3\xA5\"}}]");
  EXPECT_EQ(parsed.content,
            "\xE3\x81\x93\xE3\x82\x93\xE3\x81\xAB\xE3\x81\xA1\xE3\x81\xAF \xF0\x9F\x8C\x8D");
  EXPECT_THAT(parsed.tool_calls, ElementsAre(IsCall("f", "{\"t\":\"\xC3\xA5\"}")));
}

}  // namespace
}  // namespace kvjit::serve
