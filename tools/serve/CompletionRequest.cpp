#include "tools/serve/CompletionRequest.h"

#include <cmath>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"
#include "runtime/core/StatusMacros.h"
#include "tools/serve/ApiError.h"
#include "tools/serve/JsonFields.h"

namespace kvjit::serve {
namespace {

using Json = nlohmann::json;

absl::Status CheckRange(bool in_range, absl::string_view field, double value,
                        absl::string_view expected) {
  if (in_range) return absl::OkStatus();
  return FieldError(field, absl::StrCat("must be ", expected, ", got ", value));
}

// A token id list: JSON integers in [0, int32 max] (the vocabulary is
// checked once the model is known).
absl::StatusOr<std::vector<int32_t>> TokenIds(const Json& value, absl::string_view field) {
  std::vector<int32_t> ids;
  for (size_t i = 0; i < value.size(); ++i) {
    const Json& id = value[i];
    if (!id.is_number_integer() || id.get<int64_t>() < 0 ||
        id.get<int64_t>() > std::numeric_limits<int32_t>::max()) {
      return FieldError(field, absl::StrCat("element ", i, " must be a token id (an integer of at "
                                            "least 0), got ", id.dump()));
    }
    ids.push_back(static_cast<int32_t>(id.get<int64_t>()));
  }
  return ids;
}

// OpenAI's `prompt`: a string, token ids, or a list of one of those (several
// prompts in one request are refused: one request per prompt).
absl::Status ReadPrompt(const JsonFields& fields, CompletionRequest& request) {
  const Json* prompt = fields.Find("prompt");
  if (prompt == nullptr) return FieldError("prompt", "is required");
  if (prompt->is_array() && !prompt->empty() && (prompt->front().is_string() ||
                                                 prompt->front().is_array())) {
    if (prompt->size() != 1) {
      return FieldError("prompt", absl::StrCat("holds ", prompt->size(),
                                               " prompts; this server takes one prompt per "
                                               "request (send one request each)"));
    }
    prompt = &prompt->front();
  }
  if (prompt->is_string()) {
    request.prompt_text = prompt->get<std::string>();
    if (request.prompt_text->empty()) return FieldError("prompt", "is empty");
    return absl::OkStatus();
  }
  if (!prompt->is_array()) {
    return FieldError("prompt", absl::StrCat("must be a string or a list of token ids, got ",
                                             JsonTypeName(*prompt)));
  }
  if (prompt->empty()) return FieldError("prompt", "is empty");
  KVJIT_ASSIGN_OR_RETURN(request.prompt_token_ids, TokenIds(*prompt, "prompt"));
  return absl::OkStatus();
}

// A message's `content`: a string, or a list of {"type": "text", "text"}
// parts, joined by newlines as vLLM joins them.
absl::StatusOr<std::string> MessageContent(const Json& content, const std::string& field) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) {
    return FieldError(field, absl::StrCat("must be a string or a list of text parts, got ",
                                          JsonTypeName(content)));
  }
  std::vector<std::string> texts;
  for (size_t i = 0; i < content.size(); ++i) {
    const Json& part = content[i];
    const std::string part_field = absl::StrCat(field, "[", i, "]");
    if (!part.is_object()) return FieldError(part_field, "must be an object");
    auto type = part.find("type");
    auto text = part.find("text");
    if (type == part.end() || *type != "text" || text == part.end() || !text->is_string()) {
      return FieldError(part_field, "must be {\"type\": \"text\", \"text\": ...}; only text "
                                    "content is supported");
    }
    texts.push_back(text->get<std::string>());
  }
  return absl::StrJoin(texts, "\n");
}

// An assistant message's `tool_calls`: [{"id", "type": "function",
// "function": {"name", "arguments"}}], arguments a JSON object's text (or
// the object itself, as some clients send it).
absl::StatusOr<std::vector<ChatToolCall>> MessageToolCalls(const JsonFields& message,
                                                          const std::string& field) {
  std::vector<ChatToolCall> calls;
  const Json* list = message.Find("tool_calls");
  if (list == nullptr) return calls;
  if (!list->is_array()) {
    return FieldError(field, absl::StrCat("must be a list, got ", JsonTypeName(*list)));
  }
  for (size_t i = 0; i < list->size(); ++i) {
    const Json& call = (*list)[i];
    const std::string call_field = absl::StrCat(field, "[", i, "]");
    if (!call.is_object() || !call.contains("function") || !call.at("function").is_object()) {
      return FieldError(call_field, "must be {\"id\", \"type\": \"function\", \"function\": "
                                    "{\"name\", \"arguments\"}}");
    }
    const Json& function = call.at("function");
    ChatToolCall parsed;
    if (call.contains("id") && call.at("id").is_string()) parsed.id = call.at("id").get<std::string>();
    if (!function.contains("name") || !function.at("name").is_string()) {
      return FieldError(call_field + ".function.name", "is required");
    }
    parsed.name = function.at("name").get<std::string>();
    const Json arguments = function.value("arguments", Json("{}"));
    if (arguments.is_object()) {
      parsed.arguments = arguments.dump();
    } else if (arguments.is_string() &&
               Json::parse(arguments.get<std::string>(), nullptr, false).is_object()) {
      parsed.arguments = arguments.get<std::string>();
    } else {
      return FieldError(call_field + ".function.arguments", "must be a JSON object or its text");
    }
    calls.push_back(std::move(parsed));
  }
  return calls;
}

absl::Status ReadMessages(const JsonFields& fields, CompletionRequest& request) {
  const Json* messages = fields.Find("messages");
  if (messages == nullptr) return FieldError("messages", "is required");
  if (!messages->is_array()) {
    return FieldError("messages", absl::StrCat("must be a list, got ", JsonTypeName(*messages)));
  }
  if (messages->empty()) return FieldError("messages", "is empty");
  for (size_t i = 0; i < messages->size(); ++i) {
    const Json& message = (*messages)[i];
    const std::string field = absl::StrCat("messages[", i, "]");
    if (!message.is_object()) {
      return FieldError(field, absl::StrCat("must be an object, got ", JsonTypeName(message)));
    }
    const JsonFields message_fields(message);
    KVJIT_ASSIGN_OR_RETURN(std::optional<std::string> role,
                           message_fields.String("role"));
    if (!role.has_value()) return FieldError(absl::StrCat(field, ".role"), "is required");
    // OpenAI's newer name for the system turn.
    if (*role == "developer") role = "system";
    if (*role != "system" && *role != "user" && *role != "assistant" && *role != "tool") {
      return FieldError(absl::StrCat(field, ".role"),
                        absl::StrCat("'", *role, "' is not supported (system, user, assistant "
                                     "or tool)"));
    }
    ChatMessage chat_message{*role, ""};
    if (*role == "assistant") {
      KVJIT_ASSIGN_OR_RETURN(chat_message.tool_calls,
                             MessageToolCalls(message_fields, absl::StrCat(field, ".tool_calls")));
    }
    if (*role == "tool") {
      KVJIT_ASSIGN_OR_RETURN(std::optional<std::string> call_id,
                             message_fields.String("tool_call_id"));
      if (!call_id) return FieldError(absl::StrCat(field, ".tool_call_id"), "is required");
      chat_message.tool_call_id = *std::move(call_id);
    }
    // An assistant turn that only called functions has no content.
    const Json* content = message_fields.Find("content");
    if (content == nullptr && chat_message.tool_calls.empty()) {
      return FieldError(absl::StrCat(field, ".content"), "is required");
    }
    if (content != nullptr) {
      KVJIT_ASSIGN_OR_RETURN(chat_message.content,
                             MessageContent(*content, absl::StrCat(field, ".content")));
    }
    request.messages.push_back(std::move(chat_message));
  }
  return absl::OkStatus();
}

absl::Status ReadSampling(const JsonFields& fields, CompletionRequest& request) {
  sampling::SamplingParams& params = request.sampling;
  KVJIT_ASSIGN_OR_RETURN(std::optional<double> temperature, fields.Number("temperature"));
  if (temperature) {
    KVJIT_RETURN_IF_ERROR(CheckRange(*temperature >= 0 && std::isfinite(*temperature),
                                     "temperature", *temperature, "finite and at least 0"));
    params.temperature = static_cast<float>(*temperature);
  }
  KVJIT_ASSIGN_OR_RETURN(std::optional<double> top_p, fields.Number("top_p"));
  if (top_p) {
    KVJIT_RETURN_IF_ERROR(CheckRange(*top_p > 0 && *top_p <= 1, "top_p", *top_p, "in (0, 1]"));
    params.top_p = static_cast<float>(*top_p);
  }
  KVJIT_ASSIGN_OR_RETURN(std::optional<int64_t> top_k, fields.Integer("top_k"));
  if (top_k) {
    // vLLM and llama.cpp spell "keep all" -1 or 0.
    KVJIT_RETURN_IF_ERROR(CheckRange(*top_k >= -1 && *top_k <= std::numeric_limits<int32_t>::max(),
                                     "top_k", static_cast<double>(*top_k),
                                     "-1 or 0 (all tokens) or a positive integer"));
    params.top_k = *top_k < 0 ? 0 : static_cast<int32_t>(*top_k);
  }
  KVJIT_ASSIGN_OR_RETURN(std::optional<double> min_p, fields.Number("min_p"));
  if (min_p) {
    KVJIT_RETURN_IF_ERROR(CheckRange(*min_p >= 0 && *min_p <= 1, "min_p", *min_p, "in [0, 1]"));
    params.min_p = static_cast<float>(*min_p);
  }
  for (auto [name, target] : {std::pair{"presence_penalty", &params.presence_penalty},
                              std::pair{"frequency_penalty", &params.frequency_penalty}}) {
    KVJIT_ASSIGN_OR_RETURN(std::optional<double> penalty, fields.Number(name));
    if (!penalty) continue;
    KVJIT_RETURN_IF_ERROR(CheckRange(*penalty >= -2 && *penalty <= 2, name, *penalty, "in [-2, 2]"));
    *target = static_cast<float>(*penalty);
  }
  KVJIT_ASSIGN_OR_RETURN(std::optional<double> repetition, fields.Number("repetition_penalty"));
  if (repetition) {
    KVJIT_RETURN_IF_ERROR(CheckRange(*repetition > 0 && std::isfinite(*repetition),
                                     "repetition_penalty", *repetition, "finite and above 0"));
    params.repetition_penalty = static_cast<float>(*repetition);
  }
  KVJIT_ASSIGN_OR_RETURN(std::optional<int64_t> seed, fields.Integer("seed"));
  if (seed) request.seed = static_cast<uint64_t>(*seed);
  return absl::OkStatus();
}

absl::Status ReadStop(const JsonFields& fields, const CompletionRequestLimits& limits,
                      CompletionRequest& request) {
  if (const Json* stop = fields.Find("stop")) {
    if (stop->is_string()) {
      request.stop.push_back(stop->get<std::string>());
    } else if (stop->is_array()) {
      for (size_t i = 0; i < stop->size(); ++i) {
        if (!(*stop)[i].is_string()) {
          return FieldError("stop", absl::StrCat("element ", i, " must be a string, got ",
                                                 JsonTypeName((*stop)[i])));
        }
        request.stop.push_back((*stop)[i].get<std::string>());
      }
    } else {
      return FieldError("stop", absl::StrCat("must be a string or a list of strings, got ",
                                             JsonTypeName(*stop)));
    }
    if (static_cast<int64_t>(request.stop.size()) > limits.max_stop_strings) {
      return FieldError("stop", absl::StrCat("holds ", request.stop.size(),
                                             " strings; at most ", limits.max_stop_strings));
    }
    for (const std::string& text : request.stop) {
      if (text.empty()) return FieldError("stop", "holds an empty string");
    }
  }
  if (const Json* ids = fields.Find("stop_token_ids")) {
    if (!ids->is_array()) {
      return FieldError("stop_token_ids", absl::StrCat("must be a list of token ids, got ",
                                                       JsonTypeName(*ids)));
    }
    KVJIT_ASSIGN_OR_RETURN(request.stop_token_ids, TokenIds(*ids, "stop_token_ids"));
  }
  KVJIT_ASSIGN_OR_RETURN(std::optional<bool> ignore_eos, fields.Bool("ignore_eos"));
  request.ignore_eos = ignore_eos.value_or(false);
  return absl::OkStatus();
}

absl::Status ReadLogprobs(const JsonFields& fields, const CompletionRequestLimits& limits,
                          CompletionRequest& request) {
  const std::string range = absl::StrCat("0 to ", limits.max_logprobs);
  if (request.kind == ApiKind::kCompletion) {
    KVJIT_ASSIGN_OR_RETURN(std::optional<int64_t> logprobs, fields.Integer("logprobs"));
    if (!logprobs) return absl::OkStatus();
    KVJIT_RETURN_IF_ERROR(CheckRange(*logprobs >= 0 && *logprobs <= limits.max_logprobs,
                                     "logprobs", static_cast<double>(*logprobs), range));
    request.top_logprobs = *logprobs;
    return absl::OkStatus();
  }
  KVJIT_ASSIGN_OR_RETURN(std::optional<bool> logprobs, fields.Bool("logprobs"));
  KVJIT_ASSIGN_OR_RETURN(std::optional<int64_t> top_logprobs, fields.Integer("top_logprobs"));
  if (top_logprobs) {
    KVJIT_RETURN_IF_ERROR(CheckRange(*top_logprobs >= 0 && *top_logprobs <= limits.max_logprobs,
                                     "top_logprobs", static_cast<double>(*top_logprobs), range));
    if (!logprobs.value_or(false)) return FieldError("top_logprobs", "needs logprobs: true");
  }
  if (logprobs.value_or(false)) request.top_logprobs = top_logprobs.value_or(0);
  return absl::OkStatus();
}

absl::Status ReadBeamSearch(const JsonFields& fields, const CompletionRequestLimits& limits,
                            CompletionRequest& request) {
  KVJIT_ASSIGN_OR_RETURN(std::optional<int64_t> best_of, fields.Integer("best_of"));
  KVJIT_ASSIGN_OR_RETURN(std::optional<bool> use_beam_search, fields.Bool("use_beam_search"));
  if (!use_beam_search.value_or(false)) {
    if (best_of && *best_of != request.n) {
      return FieldError("best_of", "above n is offered only with use_beam_search");
    }
    return absl::OkStatus();
  }
  BeamSearchRequest beam;
  beam.beam_width = best_of.value_or(request.n);
  KVJIT_RETURN_IF_ERROR(CheckRange(beam.beam_width >= request.n &&
                                       beam.beam_width <= limits.max_choices,
                                   "best_of", static_cast<double>(beam.beam_width),
                                   absl::StrCat("n (", request.n, ") to ", limits.max_choices)));
  KVJIT_ASSIGN_OR_RETURN(std::optional<double> length_penalty, fields.Number("length_penalty"));
  if (length_penalty) {
    KVJIT_RETURN_IF_ERROR(CheckRange(std::isfinite(*length_penalty), "length_penalty",
                                     *length_penalty, "finite"));
    beam.length_penalty = *length_penalty;
  }
  if (const Json* early = fields.Find("early_stopping")) {
    if (early->is_boolean()) {
      beam.early_stopping = early->get<bool>() ? runtime::EarlyStopping::kWhenBeamsFinished
                                               : runtime::EarlyStopping::kHeuristic;
    } else if (early->is_string() && *early == "never") {
      beam.early_stopping = runtime::EarlyStopping::kNever;
    } else {
      return FieldError("early_stopping",
                        absl::StrCat("must be true, false or \"never\", got ", early->dump()));
    }
  }
  if (request.top_logprobs) {
    return FieldError("logprobs", "is not offered with use_beam_search");
  }
  request.beam_search = beam;
  return absl::OkStatus();
}

// Fields that would change the output if the server honoured them: ignoring
// them would answer another question than the one asked.
absl::Status RefuseUnoffered(const JsonFields& fields) {
  if (const Json* bias = fields.Find("logit_bias"); bias != nullptr && !bias->empty()) {
    return FieldError("logit_bias", "is not supported by this server");
  }
  if (const Json* suffix = fields.Find("suffix");
      suffix != nullptr && !(suffix->is_string() && suffix->get<std::string>().empty())) {
    return FieldError("suffix", "is not supported by this server");
  }
  return absl::OkStatus();
}

absl::Status ReadFields(const JsonFields& fields, const CompletionRequestLimits& limits,
                        CompletionRequest& request) {
  KVJIT_ASSIGN_OR_RETURN(std::optional<std::string> model, fields.String("model"));
  request.model = model.value_or("");
  if (request.kind == ApiKind::kCompletion) {
    KVJIT_RETURN_IF_ERROR(ReadPrompt(fields, request));
    KVJIT_ASSIGN_OR_RETURN(std::optional<bool> echo, fields.Bool("echo"));
    request.echo = echo.value_or(false);
  } else {
    KVJIT_RETURN_IF_ERROR(ReadMessages(fields, request));
  }

  KVJIT_ASSIGN_OR_RETURN(std::optional<int64_t> max_tokens, fields.Integer("max_tokens"));
  KVJIT_ASSIGN_OR_RETURN(std::optional<int64_t> max_completion_tokens,
                         fields.Integer("max_completion_tokens"));
  const char* max_tokens_field = max_completion_tokens ? "max_completion_tokens" : "max_tokens";
  request.max_tokens = max_completion_tokens ? max_completion_tokens : max_tokens;
  if (request.max_tokens) {
    KVJIT_RETURN_IF_ERROR(CheckRange(*request.max_tokens >= 1, max_tokens_field,
                                     static_cast<double>(*request.max_tokens), "at least 1"));
  }

  KVJIT_ASSIGN_OR_RETURN(std::optional<int64_t> n, fields.Integer("n"));
  request.n = n.value_or(1);
  KVJIT_RETURN_IF_ERROR(CheckRange(request.n >= 1 && request.n <= limits.max_choices, "n",
                                   static_cast<double>(request.n),
                                   absl::StrCat("1 to ", limits.max_choices)));

  KVJIT_RETURN_IF_ERROR(ReadSampling(fields, request));
  KVJIT_RETURN_IF_ERROR(ReadStop(fields, limits, request));
  KVJIT_RETURN_IF_ERROR(ReadLogprobs(fields, limits, request));
  if (request.echo && request.top_logprobs) {
    return FieldError("echo", "with logprobs needs the prompt's log-probabilities, which this "
                              "server does not compute");
  }
  KVJIT_RETURN_IF_ERROR(ReadBeamSearch(fields, limits, request));

  KVJIT_ASSIGN_OR_RETURN(std::optional<bool> stream, fields.Bool("stream"));
  request.stream = stream.value_or(false);
  if (const Json* options = fields.Find("stream_options")) {
    if (!options->is_object()) {
      return FieldError("stream_options", absl::StrCat("must be an object, got ",
                                                       JsonTypeName(*options)));
    }
    KVJIT_ASSIGN_OR_RETURN(std::optional<bool> include_usage,
                           JsonFields(*options).Bool("include_usage"));
    request.include_usage = include_usage.value_or(false);
  }
  return RefuseUnoffered(fields);
}

}  // namespace

absl::StatusOr<CompletionRequest> ParseCompletionRequest(ApiKind kind, absl::string_view body,
                                                         const CompletionRequestLimits& limits) {
  Json json;
  try {
    json = Json::parse(body.begin(), body.end());
  } catch (const Json::parse_error& error) {
    return absl::InvalidArgumentError(absl::StrCat("the body is not valid JSON: ", error.what()));
  }
  if (!json.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the body must be a JSON object, got ", JsonTypeName(json)));
  }
  CompletionRequest request;
  request.kind = kind;
  KVJIT_RETURN_IF_ERROR(ReadFields(JsonFields(json), limits, request));
  // Schemas and tools keep their key order: the body again, as ordered JSON
  // (valid JSON: it parsed above), for both.
  const nlohmann::ordered_json ordered = nlohmann::ordered_json::parse(body.begin(), body.end());
  KVJIT_ASSIGN_OR_RETURN(request.structured_output, ReadStructuredOutput(ordered));
  KVJIT_ASSIGN_OR_RETURN(request.tools, ReadToolRequest(ordered, kind == ApiKind::kChatCompletion));
  if (request.tools.active() && request.beam_search) {
    return FieldError("tools", "are not offered with use_beam_search");
  }
  if (request.tools.active() && request.structured_output &&
      request.tools.choice != ToolRequest::Choice::kAuto) {
    return FieldError(request.structured_output->field,
                      "and a tool_choice that forces a call each constrain the output; give one "
                      "of them");
  }
  return request;
}

}  // namespace kvjit::serve
