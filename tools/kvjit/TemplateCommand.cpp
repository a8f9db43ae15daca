// kvjit template MODEL_OR_KVX --conversation FILE.json [--chat_template FILE]:
// the prompt the model's chat template renders for a conversation, exactly
// as Hugging Face's apply_chat_template renders it (tools/serve/template), on
// stdout with nothing added.

#include <cstdio>
#include <fstream>
#include <sstream>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "runtime/core/StatusMacros.h"
#include "runtime/exec/Executable.h"
#include "tools/kvjit/CompileOnTheFly.h"
#include "tools/kvjit/SharedFlags.h"
#include "tools/kvjit/Subcommand.h"
#include "tools/serve/template/ChatTemplate.h"

ABSL_FLAG(std::string, conversation, "",
          "a JSON file {\"messages\": [...], \"tools\": [...], \"add_generation_prompt\": true, ...}; its other "
          "members are passed to the template too");

namespace kvjit::cli {
namespace {

absl::StatusOr<std::string> ReadWholeFile(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

std::string TokenText(const kvx::Tokenizer& table, int32_t id) {
  if (id < 0 || table.tokens() == nullptr || static_cast<uint32_t>(id) >= table.tokens()->size()) return "";
  return table.tokens()->Get(static_cast<uint32_t>(id))->str();
}

absl::Status RunTemplate(const std::vector<std::string>& arguments) {
  if (arguments.size() != 1) return absl::InvalidArgumentError("expected one MODEL_OR_KVX argument");
  const std::string conversation_path = absl::GetFlag(FLAGS_conversation);
  if (conversation_path.empty()) return absl::InvalidArgumentError("--conversation FILE.json is required");
  KVJIT_ASSIGN_OR_RETURN(std::string conversation_text, ReadWholeFile(conversation_path));
  nlohmann::ordered_json conversation =
      nlohmann::ordered_json::parse(conversation_text, nullptr, /*allow_exceptions=*/false);
  if (conversation.is_discarded()) {
    return absl::InvalidArgumentError(absl::StrCat(conversation_path, " is not valid JSON"));
  }

  KVJIT_ASSIGN_OR_RETURN(std::string kvx_path, ExecutablePathFor(arguments[0], CompileOptionsFromFlags()));
  KVJIT_ASSIGN_OR_RETURN(std::unique_ptr<runtime::Executable> executable,
                         runtime::Executable::Load(kvx_path, LoadOptionsFromFlags()));
  const kvx::Tokenizer* table = executable->root().tokenizer();
  if (table == nullptr) return absl::InvalidArgumentError("the executable carries no tokenizer");

  std::string source;
  std::string origin;
  if (!absl::GetFlag(FLAGS_chat_template).empty()) {
    origin = absl::GetFlag(FLAGS_chat_template);
    KVJIT_ASSIGN_OR_RETURN(source, ReadWholeFile(origin));
  } else {
    if (table->chat_template() == nullptr || table->chat_template()->size() == 0) {
      return absl::NotFoundError("the model has no chat template; give one with --chat_template FILE");
    }
    origin = "the model's chat template";
    source = table->chat_template()->str();
  }
  absl::StatusOr<chat_template::ChatTemplate> parsed = chat_template::ChatTemplate::Parse(std::move(source));
  if (!parsed.ok()) return absl::InvalidArgumentError(absl::StrCat(origin, ": ", parsed.status().message()));

  chat_template::SpecialTokens tokens;
  tokens.bos_token = TokenText(*table, table->bos_id());
  tokens.eos_token = TokenText(*table, table->eos_id());
  tokens.unk_token = TokenText(*table, table->unk_id());
  tokens.pad_token = TokenText(*table, table->pad_id());
  absl::StatusOr<std::string> prompt = chat_template::RenderConversation(*parsed, conversation, tokens);
  if (!prompt.ok()) {
    // A template's raise_exception is its own message; other errors say where.
    if (chat_template::IsTemplateException(prompt.status())) return prompt.status();
    return absl::InvalidArgumentError(absl::StrCat(origin, ": ", prompt.status().message()));
  }
  std::fwrite(prompt->data(), 1, prompt->size(), stdout);
  std::fflush(stdout);
  return absl::OkStatus();
}

}  // namespace

Subcommand TemplateCommand() {
  return {"template",
          "print the prompt a model's chat template renders for a conversation, as Hugging Face's "
          "apply_chat_template does",
          "MODEL_OR_KVX --conversation FILE.json [--chat_template FILE.jinja]",
          "tools/kvjit/TemplateCommand.cpp", RunTemplate,
          {"block_size", "cache_dtype", "cache_dtype_k", "cache_dtype_v", "cache_rotation", "max_tokens_per_step", "verify_weights", "chat_template"}};
}

}  // namespace kvjit::cli
