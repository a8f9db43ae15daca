#include "tools/serve/OpenAiResponses.h"

#include <utility>

namespace kvjit::serve {
namespace {

using Json = nlohmann::json;

Json Bytes(const std::string& text) {
  Json bytes = Json::array();
  for (unsigned char byte : text) bytes.push_back(static_cast<int>(byte));
  return bytes;
}

Json FinishJson(const std::optional<ChoiceFinish>& finish) {
  return finish ? Json(ChoiceFinishName(*finish)) : Json(nullptr);
}

// OpenAI's tool_calls entries; `with_index` for stream deltas, which name
// the call each fragment belongs to.
Json ToolCallsJson(const std::vector<ToolCall>& calls, bool with_index) {
  Json list = Json::array();
  for (const ToolCall& call : calls) {
    Json entry;
    if (with_index) entry["index"] = call.index;
    entry["id"] = call.id;
    entry["type"] = "function";
    entry["function"] = {{"name", call.name}, {"arguments", call.arguments}};
    list.push_back(std::move(entry));
  }
  return list;
}

// llama.cpp's server reports a request's speed in a "timings" object beside
// the usage, under these names: prompt_n counts the prompt tokens computed,
// cache_n those the prefix cache gave. kvjit's prompt_ms runs from the
// request's arrival to its first token, queue wait included (its time to
// first token); predicted_per_second is one sequence's rate.
void AddTimings(const RequestUsage& usage, Json& object) {
  if (!usage.timings) return;
  const RequestTimings& timings = *usage.timings;
  Json json = {{"prompt_n", usage.prompt_tokens - usage.cached_prompt_tokens},
               {"cache_n", usage.cached_prompt_tokens},
               {"prompt_ms", timings.time_to_first_token_s * 1e3},
               {"predicted_n", usage.completion_tokens},
               {"predicted_ms", timings.generation_s * 1e3}};
  if (timings.time_per_output_token_s && *timings.time_per_output_token_s > 0) {
    json["predicted_per_token_ms"] = *timings.time_per_output_token_s * 1e3;
    json["predicted_per_second"] = 1 / *timings.time_per_output_token_s;
  }
  object["timings"] = std::move(json);
}

}  // namespace

void ChoiceText::Add(const ChoiceDelta& delta) {
  text += delta.text;
  logprobs.insert(logprobs.end(), delta.logprobs.begin(), delta.logprobs.end());
  tool_calls.insert(tool_calls.end(), delta.tool_calls.begin(), delta.tool_calls.end());
  if (delta.finish) finish = delta.finish;
}

Json UsageJson(const RequestUsage& usage) {
  return {{"prompt_tokens", usage.prompt_tokens},
          {"completion_tokens", usage.completion_tokens},
          {"total_tokens", usage.prompt_tokens + usage.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", usage.cached_prompt_tokens}}}};
}

std::string DumpJson(const Json& json) {
  return json.dump(-1, ' ', false, Json::error_handler_t::replace);
}

ResponseBuilder::ResponseBuilder(ResponseHeader header, const TextCodec& codec,
                                 int64_t num_choices, std::string echo_text)
    : header_(std::move(header)),
      codec_(codec),
      echo_text_(std::move(echo_text)),
      text_offsets_(num_choices, static_cast<int64_t>(echo_text_.size())) {}

Json ResponseBuilder::Object(const char* object) const {
  return {{"id", header_.id}, {"object", object}, {"created", header_.created},
          {"model", header_.model}};
}

// Chat: {"content": [{token, logprob, bytes, top_logprobs}]}; completions:
// parallel lists of tokens, their log-probabilities, their alternatives and
// their offsets in the text.
Json ResponseBuilder::Logprobs(const std::vector<TokenLogprob>& logprobs, int64_t index) {
  if (header_.kind == ApiKind::kChatCompletion) {
    Json content = Json::array();
    for (const TokenLogprob& entry : logprobs) {
      const std::string text = codec_.TokenBytes(entry.token);
      Json top = Json::array();
      for (const auto& [token, logprob] : entry.top) {
        const std::string top_text = codec_.TokenBytes(token);
        top.push_back({{"token", top_text}, {"logprob", logprob}, {"bytes", Bytes(top_text)}});
      }
      content.push_back({{"token", text},
                         {"logprob", entry.logprob},
                         {"bytes", Bytes(text)},
                         {"top_logprobs", std::move(top)}});
    }
    return {{"content", std::move(content)}};
  }
  Json tokens = Json::array(), token_logprobs = Json::array(), top_logprobs = Json::array(),
       text_offset = Json::array();
  for (const TokenLogprob& entry : logprobs) {
    const std::string text = codec_.TokenBytes(entry.token);
    tokens.push_back(text);
    token_logprobs.push_back(entry.logprob);
    Json top = Json::object();
    for (const auto& [token, logprob] : entry.top) top[codec_.TokenBytes(token)] = logprob;
    top_logprobs.push_back(std::move(top));
    text_offset.push_back(text_offsets_[index]);
    text_offsets_[index] += static_cast<int64_t>(text.size());
  }
  return {{"tokens", std::move(tokens)},
          {"token_logprobs", std::move(token_logprobs)},
          {"top_logprobs", std::move(top_logprobs)},
          {"text_offset", std::move(text_offset)}};
}

Json ResponseBuilder::Response(const std::vector<ChoiceText>& choices, const RequestUsage& usage) {
  const bool chat = header_.kind == ApiKind::kChatCompletion;
  Json response = Object(chat ? "chat.completion" : "text_completion");
  Json list = Json::array();
  for (size_t i = 0; i < choices.size(); ++i) {
    const ChoiceText& choice = choices[i];
    const int64_t index = static_cast<int64_t>(i);
    // Log-probabilities are reported only where asked: a request that asked
    // has them on every token.
    Json logprobs = choice.logprobs.empty() ? Json(nullptr) : Logprobs(choice.logprobs, index);
    Json entry = {{"index", index}, {"logprobs", std::move(logprobs)},
                  {"finish_reason", FinishJson(choice.finish)}};
    if (chat) {
      entry["message"] = {{"role", "assistant"}, {"content", choice.text}};
      // A reply that only called functions has no content.
      if (!choice.tool_calls.empty()) {
        if (choice.text.empty()) entry["message"]["content"] = nullptr;
        entry["message"]["tool_calls"] = ToolCallsJson(choice.tool_calls, /*with_index=*/false);
      }
    } else {
      entry["text"] = echo_text_ + choice.text;
    }
    list.push_back(std::move(entry));
  }
  response["choices"] = std::move(list);
  response["usage"] = UsageJson(usage);
  AddTimings(usage, response);
  return response;
}

Json ResponseBuilder::OpeningChunk(int64_t index, bool include_usage) const {
  const bool chat = header_.kind == ApiKind::kChatCompletion;
  if (!chat && echo_text_.empty()) return nullptr;
  Json chunk = Object(chat ? "chat.completion.chunk" : "text_completion");
  Json choice = {{"index", index}, {"logprobs", nullptr}, {"finish_reason", nullptr}};
  if (chat) {
    choice["delta"] = {{"role", "assistant"}, {"content", ""}};
  } else {
    choice["text"] = echo_text_;
  }
  chunk["choices"] = Json::array({std::move(choice)});
  if (include_usage) chunk["usage"] = nullptr;
  return chunk;
}

Json ResponseBuilder::Chunk(const ChoiceDelta& delta, bool include_usage) {
  const bool chat = header_.kind == ApiKind::kChatCompletion;
  Json chunk = Object(chat ? "chat.completion.chunk" : "text_completion");
  Json logprobs = delta.logprobs.empty() ? Json(nullptr) : Logprobs(delta.logprobs, delta.index);
  Json choice = {{"index", delta.index}, {"logprobs", std::move(logprobs)},
                 {"finish_reason", FinishJson(delta.finish)}};
  if (chat) {
    choice["delta"] = delta.text.empty() ? Json::object() : Json{{"content", delta.text}};
    if (!delta.tool_calls.empty()) {
      choice["delta"]["tool_calls"] = ToolCallsJson(delta.tool_calls, /*with_index=*/true);
    }
  } else {
    choice["text"] = delta.text;
  }
  chunk["choices"] = Json::array({std::move(choice)});
  if (include_usage) chunk["usage"] = nullptr;
  return chunk;
}

Json ResponseBuilder::UsageChunk(const RequestUsage& usage) const {
  Json chunk = Object(header_.kind == ApiKind::kChatCompletion ? "chat.completion.chunk"
                                                               : "text_completion");
  chunk["choices"] = Json::array();
  chunk["usage"] = UsageJson(usage);
  AddTimings(usage, chunk);
  return chunk;
}

}  // namespace kvjit::serve
