// Reading OpenAI request bodies: the fields the openai client sends, their
// defaults, and an error naming the field for every bad value.

#include "tools/serve/CompletionRequest.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tools/serve/ApiError.h"

namespace kvjit::serve {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

absl::StatusOr<CompletionRequest> Completion(const std::string& body) {
  return ParseCompletionRequest(ApiKind::kCompletion, body, CompletionRequestLimits{});
}

absl::StatusOr<CompletionRequest> Chat(const std::string& body) {
  return ParseCompletionRequest(ApiKind::kChatCompletion, body, CompletionRequestLimits{});
}

// The request is refused with 400 and an error naming `field`.
void ExpectFieldError(const absl::StatusOr<CompletionRequest>& request, const std::string& field) {
  ASSERT_FALSE(request.ok());
  EXPECT_EQ(HttpStatusFor(request.status()), 400) << request.status();
  EXPECT_EQ(ErrorField(request.status()).value_or("(none)"), field) << request.status();
  EXPECT_THAT(std::string(request.status().message()), HasSubstr(field));
}

TEST(CompletionRequestTest, ReadsACompletionWithItsDefaults) {
  auto request = Completion(R"({"model": "m", "prompt": "Once upon a time"})");
  ASSERT_TRUE(request.ok()) << request.status();
  EXPECT_EQ(request->model, "m");
  EXPECT_EQ(request->prompt_text, "Once upon a time");
  EXPECT_FALSE(request->max_tokens.has_value());
  EXPECT_EQ(request->sampling.temperature, 1.0f);
  EXPECT_EQ(request->n, 1);
  EXPECT_FALSE(request->seed.has_value());
  EXPECT_FALSE(request->top_logprobs.has_value());
  EXPECT_FALSE(request->stream);
  EXPECT_FALSE(request->beam_search.has_value());
}

TEST(CompletionRequestTest, ReadsEveryFieldTheOpenAiClientSends) {
  auto request = Completion(R"({
      "model": "m", "prompt": [1, 2, 3], "max_tokens": 7, "temperature": 0.5, "top_p": 0.9,
      "top_k": 20, "min_p": 0.1, "seed": 42, "stop": ["a", "bc"], "n": 2,
      "presence_penalty": 0.5, "frequency_penalty": -0.5, "repetition_penalty": 1.1,
      "logprobs": 3, "echo": false, "stream": true, "stream_options": {"include_usage": true},
      "stop_token_ids": [9], "ignore_eos": true, "user": "someone", "unknown_field": [1]})");
  ASSERT_TRUE(request.ok()) << request.status();
  EXPECT_THAT(*request->prompt_token_ids, ElementsAre(1, 2, 3));
  EXPECT_EQ(request->max_tokens, 7);
  EXPECT_EQ(request->sampling.temperature, 0.5f);
  EXPECT_EQ(request->sampling.top_p, 0.9f);
  EXPECT_EQ(request->sampling.top_k, 20);
  EXPECT_EQ(request->sampling.min_p, 0.1f);
  EXPECT_EQ(request->seed, 42u);
  EXPECT_THAT(request->stop, ElementsAre("a", "bc"));
  EXPECT_EQ(request->n, 2);
  EXPECT_EQ(request->sampling.presence_penalty, 0.5f);
  EXPECT_EQ(request->sampling.frequency_penalty, -0.5f);
  EXPECT_EQ(request->sampling.repetition_penalty, 1.1f);
  EXPECT_EQ(request->top_logprobs, 3);
  EXPECT_TRUE(request->stream);
  EXPECT_TRUE(request->include_usage);
  EXPECT_THAT(request->stop_token_ids, ElementsAre(9));
  EXPECT_TRUE(request->ignore_eos);
}

TEST(CompletionRequestTest, ReadsAChatWithTextPartsAndLogprobs) {
  auto request = Chat(R"({"messages": [
      {"role": "developer", "content": "Be brief."},
      {"role": "user", "content": [{"type": "text", "text": "Hi"}, {"type": "text", "text": "there"}]}],
      "max_completion_tokens": 5, "max_tokens": 9, "logprobs": true, "top_logprobs": 2,
      "stop": "END"})");
  ASSERT_TRUE(request.ok()) << request.status();
  ASSERT_EQ(request->messages.size(), 2u);
  EXPECT_EQ(request->messages[0].role, "system");
  EXPECT_EQ(request->messages[1].content, "Hi\nthere");
  EXPECT_EQ(request->max_tokens, 5);  // max_completion_tokens wins
  EXPECT_EQ(request->top_logprobs, 2);
  EXPECT_THAT(request->stop, ElementsAre("END"));
}

TEST(CompletionRequestTest, NullMeansTheDefault) {
  auto request = Completion(R"({"prompt": "x", "max_tokens": null, "stop": null, "seed": null})");
  ASSERT_TRUE(request.ok()) << request.status();
  EXPECT_FALSE(request->max_tokens.has_value());
  EXPECT_TRUE(request->stop.empty());
}

TEST(CompletionRequestTest, ReadsVllmBeamSearch) {
  auto request = Completion(R"({"prompt": "x", "use_beam_search": true, "n": 2, "best_of": 4,
                               "length_penalty": 0.5, "early_stopping": "never"})");
  ASSERT_TRUE(request.ok()) << request.status();
  ASSERT_TRUE(request->beam_search.has_value());
  EXPECT_EQ(request->beam_search->beam_width, 4);
  EXPECT_EQ(request->beam_search->length_penalty, 0.5);
  EXPECT_EQ(request->beam_search->early_stopping, runtime::EarlyStopping::kNever);
}

TEST(CompletionRequestTest, MalformedJsonIsA400) {
  for (const char* body : {"{", "not json", "{\"prompt\": \"x\",}", ""}) {
    auto request = Completion(body);
    ASSERT_FALSE(request.ok()) << body;
    EXPECT_EQ(HttpStatusFor(request.status()), 400);
    EXPECT_THAT(std::string(request.status().message()), HasSubstr("not valid JSON"));
  }
  auto array = Completion("[1, 2]");
  ASSERT_FALSE(array.ok());
  EXPECT_THAT(std::string(array.status().message()), HasSubstr("must be a JSON object"));
}

TEST(CompletionRequestTest, WrongTypesNameTheField) {
  ExpectFieldError(Completion(R"({"prompt": "x", "max_tokens": "ten"})"), "max_tokens");
  ExpectFieldError(Completion(R"({"prompt": "x", "max_tokens": 2.5})"), "max_tokens");
  ExpectFieldError(Completion(R"({"prompt": "x", "temperature": "hot"})"), "temperature");
  ExpectFieldError(Completion(R"({"prompt": "x", "stream": 1})"), "stream");
  ExpectFieldError(Completion(R"({"prompt": "x", "stop": 3})"), "stop");
  ExpectFieldError(Completion(R"({"prompt": "x", "stop": ["a", 3]})"), "stop");
  ExpectFieldError(Completion(R"({"prompt": "x", "n": true})"), "n");
  ExpectFieldError(Completion(R"({"prompt": "x", "model": 5})"), "model");
  ExpectFieldError(Completion(R"({"prompt": 5})"), "prompt");
  ExpectFieldError(Completion(R"({"prompt": [1, "a"]})"), "prompt");
  ExpectFieldError(Completion(R"({"prompt": "x", "stream_options": 1})"), "stream_options");
  ExpectFieldError(Chat(R"({"messages": "hi"})"), "messages");
  ExpectFieldError(Chat(R"({"messages": [{"role": "user", "content": 5}]})"),
                   "messages[0].content");
  ExpectFieldError(Chat(R"({"messages": [{"role": "user", "content": "x"}], "logprobs": 2})"),
                   "logprobs");
}

TEST(CompletionRequestTest, OutOfRangeValuesNameTheField) {
  ExpectFieldError(Completion(R"({"prompt": "x", "max_tokens": 0})"), "max_tokens");
  ExpectFieldError(Completion(R"({"prompt": "x", "temperature": -1})"), "temperature");
  ExpectFieldError(Completion(R"({"prompt": "x", "top_p": 0})"), "top_p");
  ExpectFieldError(Completion(R"({"prompt": "x", "top_p": 1.5})"), "top_p");
  ExpectFieldError(Completion(R"({"prompt": "x", "top_k": -2})"), "top_k");
  ExpectFieldError(Completion(R"({"prompt": "x", "min_p": 2})"), "min_p");
  ExpectFieldError(Completion(R"({"prompt": "x", "presence_penalty": 3})"), "presence_penalty");
  ExpectFieldError(Completion(R"({"prompt": "x", "frequency_penalty": -3})"), "frequency_penalty");
  ExpectFieldError(Completion(R"({"prompt": "x", "repetition_penalty": 0})"), "repetition_penalty");
  ExpectFieldError(Completion(R"({"prompt": "x", "n": 0})"), "n");
  ExpectFieldError(Completion(R"({"prompt": "x", "n": 17})"), "n");
  ExpectFieldError(Completion(R"({"prompt": "x", "logprobs": 21})"), "logprobs");
  ExpectFieldError(Completion(R"({"prompt": "x", "stop": [""]})"), "stop");
  ExpectFieldError(Completion(R"({"prompt": [-1]})"), "prompt");
  ExpectFieldError(Chat(R"({"messages": [{"role": "user", "content": "x"}], "top_logprobs": 3})"),
                   "top_logprobs");
  ExpectFieldError(Completion(R"({"prompt": "x", "use_beam_search": true, "n": 3, "best_of": 2})"),
                   "best_of");
  ExpectFieldError(Completion(R"({"prompt": "x", "best_of": 3})"), "best_of");
}

TEST(CompletionRequestTest, MissingOrEmptyPromptsNameTheField) {
  ExpectFieldError(Completion(R"({"model": "m"})"), "prompt");
  ExpectFieldError(Completion(R"({"prompt": ""})"), "prompt");
  ExpectFieldError(Completion(R"({"prompt": []})"), "prompt");
  ExpectFieldError(Completion(R"({"prompt": ["a", "b"]})"), "prompt");
  ExpectFieldError(Chat(R"({"model": "m"})"), "messages");
  ExpectFieldError(Chat(R"({"messages": []})"), "messages");
  ExpectFieldError(Chat(R"({"messages": [{"content": "x"}]})"), "messages[0].role");
  ExpectFieldError(Chat(R"({"messages": [{"role": "function", "content": "x"}]})"), "messages[0].role");
  ExpectFieldError(Chat(R"({"messages": [{"role": "tool", "content": "x"}]})"),
                   "messages[0].tool_call_id");
  ExpectFieldError(Chat(R"({"messages": [{"role": "assistant", "tool_calls": [{"id": "a"}]}]})"),
                   "messages[0].tool_calls[0]");
  ExpectFieldError(Chat(R"({"messages": [{"role": "assistant", "tool_calls": [{"id": "a",
                           "function": {"name": "f", "arguments": "[1]"}}]}]})"),
                   "messages[0].tool_calls[0].function.arguments");
  ExpectFieldError(Chat(R"({"messages": [{"role": "user"}]})"), "messages[0].content");
}

TEST(CompletionRequestTest, RefusesWhatItWouldOtherwiseSilentlyIgnore) {
  ExpectFieldError(Completion(R"({"prompt": "x", "logit_bias": {"1": 5}})"), "logit_bias");
  ExpectFieldError(Completion(R"({"prompt": "x", "suffix": "end"})"), "suffix");
  ExpectFieldError(Completion(R"({"prompt": "x", "echo": true, "logprobs": 1})"), "echo");
  ExpectFieldError(Completion(R"({"prompt": "x", "use_beam_search": true, "logprobs": 1})"),
                   "logprobs");
  ExpectFieldError(Chat(R"({"messages": [{"role": "user", "content": "x"}],
                           "tools": [{"type": "function"}]})"),
                   "tools[0].function");
  // Their empty or default forms are fine.
  EXPECT_TRUE(Chat(R"({"messages": [{"role": "user", "content": "x"}], "tools": [],
                      "logit_bias": {}, "response_format": {"type": "text"}})")
                  .ok());
}

constexpr char kUser[] = R"("messages": [{"role": "user", "content": "x"}])";

std::string ChatWith(const std::string& fields) { return absl::StrCat("{", kUser, ", ", fields, "}"); }

TEST(StructuredOutputTest, ReadsOpenAiResponseFormats) {
  auto object = Chat(ChatWith(R"("response_format": {"type": "json_object"})"));
  ASSERT_TRUE(object.ok()) << object.status();
  ASSERT_TRUE(object->structured_output.has_value());
  EXPECT_EQ(object->structured_output->spec.kind, grammar::GrammarSpec::Kind::kJsonObject);
  EXPECT_EQ(object->structured_output->field, "response_format");

  // The schema keeps its key order: the order the output writes its
  // properties in.
  auto schema = Chat(ChatWith(R"("response_format": {"type": "json_schema", "json_schema":
      {"name": "w", "strict": true, "schema": {"type": "object",
       "properties": {"zeta": {"type": "string"}, "alpha": {"type": "integer"}}}}})"));
  ASSERT_TRUE(schema.ok()) << schema.status();
  ASSERT_TRUE(schema->structured_output.has_value());
  EXPECT_EQ(schema->structured_output->spec.kind, grammar::GrammarSpec::Kind::kJsonSchema);
  EXPECT_EQ(schema->structured_output->spec.text,
            R"({"type":"object","properties":{"zeta":{"type":"string"},"alpha":{"type":"integer"}}})");

  auto text = Chat(ChatWith(R"("response_format": {"type": "text"})"));
  ASSERT_TRUE(text.ok());
  EXPECT_FALSE(text->structured_output.has_value());
}

TEST(StructuredOutputTest, ReadsVllmAndLlamaCppFields) {
  using Kind = grammar::GrammarSpec::Kind;
  const struct {
    std::string fields;
    Kind kind;
    std::string field;
    std::string text;
  } cases[] = {
      {R"("structured_outputs": {"json": {"type": "object"}})", Kind::kJsonSchema,
       "structured_outputs.json", R"({"type":"object"})"},
      {R"("structured_outputs": {"json": "{\"type\": \"array\"}"})", Kind::kJsonSchema,
       "structured_outputs.json", R"({"type":"array"})"},
      {R"("structured_outputs": {"regex": "[0-9]+", "choice": null})", Kind::kRegex,
       "structured_outputs.regex", "[0-9]+"},
      {R"("structured_outputs": {"grammar": "root ::= \"a\""})", Kind::kEbnf,
       "structured_outputs.grammar", R"(root ::= "a")"},
      {R"("structured_outputs": {"json_object": true})", Kind::kJsonObject,
       "structured_outputs.json_object", ""},
      {R"("json_schema": {"type": "string"})", Kind::kJsonSchema, "json_schema",
       R"({"type":"string"})"},
      {R"("grammar": "root ::= [a-z]+")", Kind::kEbnf, "grammar", "root ::= [a-z]+"},
  };
  for (const auto& c : cases) {
    auto request = Chat(ChatWith(c.fields));
    ASSERT_TRUE(request.ok()) << c.fields << ": " << request.status();
    ASSERT_TRUE(request->structured_output.has_value()) << c.fields;
    EXPECT_EQ(request->structured_output->spec.kind, c.kind) << c.fields;
    EXPECT_EQ(request->structured_output->field, c.field) << c.fields;
    EXPECT_EQ(request->structured_output->spec.text, c.text) << c.fields;
  }
  auto choice = Completion(R"({"prompt": "x", "structured_outputs": {"choice": ["a", "b\"c"]}})");
  ASSERT_TRUE(choice.ok()) << choice.status();
  EXPECT_THAT(choice->structured_output->spec.choices, ElementsAre("a", "b\"c"));
}

TEST(StructuredOutputTest, MalformedOrConflictingFieldsNameTheField) {
  ExpectFieldError(Chat(ChatWith(R"("response_format": "json")")), "response_format");
  ExpectFieldError(Chat(ChatWith(R"("response_format": {"type": "xml"})")), "response_format");
  ExpectFieldError(Chat(ChatWith(R"("response_format": {"type": "json_schema"})")),
                   "response_format");
  ExpectFieldError(
      Chat(ChatWith(R"("response_format": {"type": "json_schema", "json_schema": {"name": "a"}})")),
      "response_format");
  ExpectFieldError(Chat(ChatWith(R"("response_format": {"type": "json_schema",
                                   "json_schema": {"schema": [1]}})")),
                   "response_format.json_schema.schema");
  ExpectFieldError(Chat(ChatWith(R"("structured_outputs": {"choice": []})")),
                   "structured_outputs.choice");
  ExpectFieldError(Chat(ChatWith(R"("structured_outputs": {"choice": ["a", 1]})")),
                   "structured_outputs.choice");
  ExpectFieldError(Chat(ChatWith(R"("structured_outputs": {"regex": ""})")),
                   "structured_outputs.regex");
  ExpectFieldError(Chat(ChatWith(R"("structured_outputs": {"json": "{not json"})")),
                   "structured_outputs.json");
  ExpectFieldError(Chat(ChatWith(R"("structured_outputs": {"structural_tag": "x"})")),
                   "structured_outputs.structural_tag");
  ExpectFieldError(Chat(ChatWith(R"("structured_outputs": {"regex": "a", "grammar": "b"})")),
                   "structured_outputs");
  ExpectFieldError(Chat(ChatWith(R"("response_format": {"type": "json_object"}, "grammar": "x")")),
                   "grammar");
  ExpectFieldError(Chat(ChatWith(R"("json_schema": "not a schema")")), "json_schema");
  // Beam search under a schema is offered; with a forced tool call it is not.
  EXPECT_TRUE(Completion(R"({"prompt": "x", "use_beam_search": true, "n": 2,
                             "json_schema": {"type": "object"}})")
                  .ok());
}

TEST(ToolRequestTest, ReadsToolsChoicesAndToolTurns) {
  auto request = Chat(R"({"messages": [
      {"role": "user", "content": "weather?"},
      {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
        "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
      {"role": "tool", "tool_call_id": "call_1", "content": "18 C"}],
    "tools": [{"type": "function", "function": {"name": "get_weather",
               "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}],
    "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
    "parallel_tool_calls": false})");
  ASSERT_TRUE(request.ok()) << request.status();
  ASSERT_EQ(request->messages.size(), 3u);
  ASSERT_EQ(request->messages[1].tool_calls.size(), 1u);
  EXPECT_EQ(request->messages[1].tool_calls[0].name, "get_weather");
  EXPECT_EQ(request->messages[1].tool_calls[0].arguments, R"({"city": "Paris"})");
  EXPECT_EQ(request->messages[1].content, "");
  EXPECT_EQ(request->messages[2].tool_call_id, "call_1");
  EXPECT_TRUE(request->tools.active());
  EXPECT_EQ(request->tools.choice, ToolRequest::Choice::kNamed);
  EXPECT_EQ(request->tools.named_function, "get_weather");
  EXPECT_FALSE(request->tools.parallel_tool_calls);
  // The tools keep the client's key order, for the chat template.
  EXPECT_EQ(request->tools.tools.dump(),
            R"([{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}])");

  auto none = Chat(R"({"messages": [{"role": "user", "content": "x"}], "tool_choice": "none",
                      "tools": [{"type": "function", "function": {"name": "f"}}]})");
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_FALSE(none->tools.active());
}

TEST(ToolRequestTest, MalformedToolsNameTheField) {
  const std::string user = R"("messages": [{"role": "user", "content": "x"}])";
  const auto chat = [&](const std::string& fields) { return Chat("{" + user + ", " + fields + "}"); };
  ExpectFieldError(chat(R"("tools": {"type": "function"})"), "tools");
  ExpectFieldError(chat(R"("tools": [{"type": "retrieval"}])"), "tools[0]");
  ExpectFieldError(chat(R"("tools": [{"type": "function", "function": {"name": "bad name"}}])"),
                   "tools[0].function.name");
  // 64 characters is the most a name may have.
  EXPECT_TRUE(chat(absl::StrCat(R"("tools": [{"type": "function", "function": {"name": ")",
                                std::string(64, 'f'), R"("}}])"))
                  .ok());
  ExpectFieldError(chat(absl::StrCat(R"("tools": [{"type": "function", "function": {"name": ")",
                                     std::string(65, 'f'), R"("}}])")),
                   "tools[0].function.name");
  ExpectFieldError(chat(R"("tools": [{"type": "function", "function": {"name": "f"}},
                                     {"type": "function", "function": {"name": "f"}}])"),
                   "tools[1].function.name");
  ExpectFieldError(chat(R"("tools": [{"type": "function", "function": {"name": "f"}}],
                           "tool_choice": {"type": "function", "function": {"name": "g"}})"),
                   "tool_choice");
  ExpectFieldError(chat(R"("tool_choice": "required")"), "tool_choice");
  ExpectFieldError(chat(R"("tools": [{"type": "function", "function": {"name": "f"}}],
                           "parallel_tool_calls": "yes")"),
                   "parallel_tool_calls");
  ExpectFieldError(chat(R"("tools": [{"type": "function", "function": {"name": "f"}}],
                           "tool_choice": "required", "response_format": {"type": "json_object"})"),
                   "response_format");
  ExpectFieldError(Completion(R"({"prompt": "x",
                                  "tools": [{"type": "function", "function": {"name": "f"}}]})"),
                   "tools");
}

}  // namespace
}  // namespace kvjit::serve
