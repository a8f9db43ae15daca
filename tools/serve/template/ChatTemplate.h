#ifndef KVJIT_TOOLS_SERVE_TEMPLATE_CHATTEMPLATE_H_
#define KVJIT_TOOLS_SERVE_TEMPLATE_CHATTEMPLATE_H_

#include <ctime>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

// A model's chat template (Jinja, from GGUF `tokenizer.chat_template` or
// tokenizer_config.json `chat_template`), rendered exactly as Hugging Face's
// apply_chat_template renders it: jinja2's ImmutableSandboxedEnvironment with
// trim_blocks and lstrip_blocks, loop controls, and the globals
// raise_exception and strftime_now; tojson is json.dumps(ensure_ascii=False).
// docs/chat-templates.md lists what of Jinja is supported.
//
//   KVJIT_ASSIGN_OR_RETURN(ChatTemplate chat, ChatTemplate::Parse(source));
//   KVJIT_ASSIGN_OR_RETURN(std::string prompt, chat.Render(context));
//
// Errors are InvalidArgument: "line N: <message>" for a syntax error or a
// failure while rendering, and exactly the template's message for its
// raise_exception (IsTemplateException tells them apart).
namespace kvjit::chat_template {

struct RenderOptions {
  // The time strftime_now formats, as UTC; the local current time where
  // unset (Hugging Face's datetime.now()).
  std::optional<std::time_t> now;
};

class ChatTemplate {
 public:
  static absl::StatusOr<ChatTemplate> Parse(std::string source);

  // Renders with `context`'s members as the template's variables. Key order
  // matters to tojson and dict iteration: the ordered_json overload keeps the
  // caller's, the json one has nlohmann's (sorted).
  absl::StatusOr<std::string> Render(const nlohmann::ordered_json& context, const RenderOptions& options = {}) const;
  absl::StatusOr<std::string> Render(const nlohmann::json& context, const RenderOptions& options = {}) const;

  const std::string& source() const { return source_; }

 private:
  struct Parsed;
  std::string source_;
  std::shared_ptr<const Parsed> parsed_;
};

// The special tokens apply_chat_template passes to a template.
struct SpecialTokens {
  std::string bos_token;
  std::string eos_token;
  std::string unk_token;
  std::string pad_token;
};

// Renders an OpenAI-style request `{"messages": [...], "tools": [...],
// "add_generation_prompt": true, ...}` as apply_chat_template does: the
// template sees messages, tools (only when given and not null),
// add_generation_prompt (false where absent), the special tokens (the empty
// ones left undefined), and every other member of `conversation` (HF's
// template kwargs, e.g. "enable_thinking" or "date_string").
absl::StatusOr<std::string> RenderConversation(const ChatTemplate& chat_template,
                                               const nlohmann::ordered_json& conversation,
                                               const SpecialTokens& special_tokens,
                                               const RenderOptions& options = {});

// Whether `status` came from the template's raise_exception.
bool IsTemplateException(const absl::Status& status);

}  // namespace kvjit::chat_template

#endif  // KVJIT_TOOLS_SERVE_TEMPLATE_CHATTEMPLATE_H_
