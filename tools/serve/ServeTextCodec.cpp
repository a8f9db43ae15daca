#include "tools/serve/ServeTextCodec.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "runtime/tokenizer/StreamingDecoder.h"
#include "tools/serve/ChatPrompt.h"

namespace kvjit::serve {
namespace {

class DecoderTextStream final : public TokenTextStream {
 public:
  explicit DecoderTextStream(const tokenizer::Tokenizer& tokenizer) : decoder_(tokenizer) {}
  std::string Push(int32_t token) override { return decoder_.Push(token); }
  std::string Flush() override { return decoder_.Flush(); }

 private:
  tokenizer::StreamingDecoder decoder_;
};

// The text of special token `id`; "" for none.
std::string TokenText(const kvx::Tokenizer& table, int32_t id) {
  if (id < 0 || table.tokens() == nullptr || static_cast<uint32_t>(id) >= table.tokens()->size()) {
    return "";
  }
  return table.tokens()->Get(static_cast<uint32_t>(id))->str();
}

}  // namespace

ServeTextCodec::ServeTextCodec(std::unique_ptr<tokenizer::Tokenizer> tokenizer)
    : tokenizer_(std::move(tokenizer)) {
  for (int32_t id = 0; id < tokenizer_->vocab_size(); ++id) {
    if (tokenizer_->IsEndOfGeneration(id)) end_of_generation_.push_back(id);
  }
}

absl::StatusOr<std::unique_ptr<ServeTextCodec>> ServeTextCodec::Create(
    std::unique_ptr<tokenizer::Tokenizer> tokenizer, const kvx::Tokenizer& table,
    const std::string& override_template) {
  std::unique_ptr<ServeTextCodec> codec(new ServeTextCodec(std::move(tokenizer)));
  codec->special_tokens_ = {TokenText(table, table.bos_id()), TokenText(table, table.eos_id()),
                            TokenText(table, table.unk_id()), TokenText(table, table.pad_id())};
  if (!override_template.empty()) {
    absl::StatusOr<chat_template::ChatTemplate> parsed =
        chat_template::ChatTemplate::Parse(override_template);
    if (!parsed.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--chat_template: ", parsed.status().message()));
    }
    codec->chat_template_source_ = override_template;
    codec->chat_template_ = *std::move(parsed);
    codec->chat_format_ = "the chat template of --chat_template";
    codec->tool_support_ = DetectToolSupport(override_template);
    return codec;
  }
  if (table.chat_template() != nullptr) codec->chat_template_source_ = table.chat_template()->str();
  if (codec->chat_template_source_.empty()) {
    codec->chat_format_ = "ChatML (the model has no chat template)";
    return codec;
  }
  absl::StatusOr<chat_template::ChatTemplate> parsed =
      chat_template::ChatTemplate::Parse(codec->chat_template_source_);
  if (!parsed.ok()) {
    codec->chat_format_ = absl::StrCat("ChatML (the model's chat template does not parse: ",
                                       parsed.status().message(), ")");
    return codec;
  }
  codec->chat_template_ = *std::move(parsed);
  codec->chat_format_ = "the model's chat template";
  codec->tool_support_ = DetectToolSupport(codec->chat_template_source_);
  return codec;
}

absl::StatusOr<std::vector<int32_t>> ServeTextCodec::EncodePrompt(absl::string_view text) const {
  return tokenizer_->Encode(std::string_view(text.data(), text.size()), /*add_special=*/true,
                            /*parse_special=*/false);
}

absl::StatusOr<std::vector<int32_t>> ServeTextCodec::EncodeChat(
    absl::Span<const ChatMessage> messages, const nlohmann::ordered_json& tools) const {
  const bool has_tool_turns = std::any_of(messages.begin(), messages.end(), [](const ChatMessage& m) {
    return m.role == "tool" || !m.tool_calls.empty();
  });
  std::vector<ChatMessage> with_tools;
  if (!tool_support_.native && (!tools.empty() || has_tool_turns)) {
    with_tools = WithToolsInText(messages, tools);
    messages = with_tools;
  }
  if (!chat_template_.has_value()) return EncodeChatMl(*tokenizer_, chat_template_source_, messages);
  return EncodeWithTemplate(messages, tool_support_.native ? tools : nlohmann::ordered_json::array());
}

// The rendered text is encoded whole, its control tokens parsed, exactly as
// Hugging Face's apply_chat_template(tokenize=True) encodes it; a message
// that spells a control token would be turned into that token, so it is
// refused.
absl::StatusOr<std::vector<int32_t>> ServeTextCodec::EncodeWithTemplate(
    absl::Span<const ChatMessage> messages, const nlohmann::ordered_json& tools) const {
  for (size_t i = 0; i < messages.size(); ++i) {
    if (std::optional<std::string> control = FindControlTokenText(*tokenizer_, messages[i].content)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "messages[", i, "].content holds the text of the control token ", *control,
          ", which the model's chat template would make that token"));
    }
    for (const ChatToolCall& call : messages[i].tool_calls) {
      if (std::optional<std::string> control = FindControlTokenText(*tokenizer_, call.arguments)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "messages[", i, "].tool_calls holds the text of the control token ", *control));
      }
    }
  }
  if (std::optional<std::string> control = FindControlTokenText(*tokenizer_, tools.dump())) {
    return absl::InvalidArgumentError(
        absl::StrCat("tools holds the text of the control token ", *control,
                     ", which the model's chat template would make that token"));
  }
  nlohmann::ordered_json conversation = {{"messages", MessagesJson(messages)},
                                         {"add_generation_prompt", true}};
  if (!tools.empty()) conversation["tools"] = tools;
  absl::StatusOr<std::string> prompt =
      chat_template::RenderConversation(*chat_template_, conversation, special_tokens_);
  if (!prompt.ok()) {
    // A template's raise_exception states what it refuses (roles that do
    // not alternate, ...); other errors are the template's fault.
    if (chat_template::IsTemplateException(prompt.status())) return prompt.status();
    return absl::InternalError(
        absl::StrCat("the model's chat template failed: ", prompt.status().message()));
  }
  return tokenizer_->Encode(*prompt, /*add_special=*/false, /*parse_special=*/true);
}

std::string ServeTextCodec::Decode(absl::Span<const int32_t> tokens) const {
  return tokenizer_->Decode(tokens);
}

std::string ServeTextCodec::TokenBytes(int32_t token) const {
  return tokenizer_->TokenToPiece(token);
}

std::unique_ptr<TokenTextStream> ServeTextCodec::NewTextStream() const {
  return std::make_unique<DecoderTextStream>(*tokenizer_);
}

std::vector<int32_t> ServeTextCodec::EndOfGenerationTokens() const { return end_of_generation_; }

absl::StatusOr<std::shared_ptr<const grammar::CompiledGrammar>> ServeTextCodec::CompileGrammar(
    const grammar::GrammarSpec& spec) const {
  grammar::GrammarCompiler* compiler = nullptr;
  {
    std::lock_guard<std::mutex> lock(grammar_compiler_mutex_);
    if (grammar_compiler_ == nullptr) {
      // Ids past the tokenizer's (a padded output layer) have no text: no
      // grammar allows them, and the sampler's mask leaves them out.
      absl::StatusOr<std::unique_ptr<grammar::GrammarCompiler>> created =
          grammar::GrammarCompiler::Create(*tokenizer_, tokenizer_->vocab_size());
      if (!created.ok()) return created.status();
      grammar_compiler_ = *std::move(created);
    }
    compiler = grammar_compiler_.get();
  }
  return compiler->Compile(spec);
}

}  // namespace kvjit::serve
