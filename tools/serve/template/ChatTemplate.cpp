#include "tools/serve/template/ChatTemplate.h"

#include "absl/strings/str_cat.h"
#include "tools/serve/template/Ast.h"
#include "tools/serve/template/Evaluator.h"
#include "tools/serve/template/Parser.h"

namespace kvjit::chat_template {

struct ChatTemplate::Parsed {
  chat_template::Body body;
};

absl::StatusOr<ChatTemplate> ChatTemplate::Parse(std::string source) {
  absl::StatusOr<chat_template::Body> body = ParseTemplate(source);
  if (!body.ok()) return body.status();
  if (absl::Status names = CheckNames(*body); !names.ok()) return names;
  auto parsed = std::make_shared<Parsed>();
  parsed->body = std::move(*body);
  ChatTemplate result;
  result.source_ = std::move(source);
  result.parsed_ = std::move(parsed);
  return result;
}

namespace {

absl::StatusOr<std::string> RenderValue(const chat_template::Body& body, const Value& context,
                                        const RenderOptions& options) {
  EvaluationOptions evaluation;
  if (options.now.has_value()) evaluation.now = &*options.now;
  std::string out;
  if (absl::Status status = Evaluate(body, context, evaluation, out); !status.ok()) return status;
  return out;
}

}  // namespace

absl::StatusOr<std::string> ChatTemplate::Render(const nlohmann::ordered_json& context,
                                                 const RenderOptions& options) const {
  if (!context.is_object()) return absl::InvalidArgumentError("the template's context must be a JSON object");
  return RenderValue(parsed_->body, Value::FromJson(context), options);
}

absl::StatusOr<std::string> ChatTemplate::Render(const nlohmann::json& context, const RenderOptions& options) const {
  if (!context.is_object()) return absl::InvalidArgumentError("the template's context must be a JSON object");
  return RenderValue(parsed_->body, Value::FromJson(context), options);
}

absl::StatusOr<std::string> RenderConversation(const ChatTemplate& chat_template,
                                               const nlohmann::ordered_json& conversation,
                                               const SpecialTokens& special_tokens, const RenderOptions& options) {
  if (!conversation.is_object()) return absl::InvalidArgumentError("a conversation must be a JSON object");
  if (!conversation.contains("messages") || !conversation["messages"].is_array()) {
    return absl::InvalidArgumentError("a conversation needs a \"messages\" array");
  }
  nlohmann::ordered_json context = nlohmann::ordered_json::object();
  context["messages"] = conversation["messages"];
  if (conversation.contains("tools") && !conversation["tools"].is_null()) context["tools"] = conversation["tools"];
  context["add_generation_prompt"] =
      conversation.contains("add_generation_prompt") ? conversation["add_generation_prompt"]
                                                     : nlohmann::ordered_json(false);
  const auto add_token = [&](const char* name, const std::string& value) {
    if (!value.empty()) context[name] = value;
  };
  add_token("bos_token", special_tokens.bos_token);
  add_token("eos_token", special_tokens.eos_token);
  add_token("unk_token", special_tokens.unk_token);
  add_token("pad_token", special_tokens.pad_token);
  for (auto it = conversation.begin(); it != conversation.end(); ++it) {
    if (it.key() == "messages" || it.key() == "tools" || it.key() == "add_generation_prompt") continue;
    context[it.key()] = it.value();
  }
  return chat_template.Render(context, options);
}

}  // namespace kvjit::chat_template
