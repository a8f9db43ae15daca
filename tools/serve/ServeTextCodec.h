#ifndef KVJIT_TOOLS_SERVE_SERVETEXTCODEC_H_
#define KVJIT_TOOLS_SERVE_SERVETEXTCODEC_H_

#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "runtime/schema/kvx_generated.h"
#include "runtime/tokenizer/Tokenizer.h"
#include "tools/serve/TextCodec.h"
#include "tools/serve/ToolPrompt.h"
#include "tools/serve/template/ChatTemplate.h"

namespace kvjit::serve {

// kvjit serve's text side over an executable's tokenizer (and kvjit run
// --chat's chat prompt): completion
// prompts as `kvjit run` encodes them, streamed text through
// tokenizer::StreamingDecoder, and chat through the model's own chat
// template (tools/serve/template, rendered as Hugging Face renders it), or
// ChatML (ChatPrompt.h) for a model without one or with one the engine
// cannot parse.
class ServeTextCodec final : public TextCodec {
 public:
  // `table` is the executable's tokenizer table, for its chat template and
  // special tokens; `override_template`, where not empty, is the template to
  // use instead of the model's (--chat_template), and an error when it does
  // not parse.
  static absl::StatusOr<std::unique_ptr<ServeTextCodec>> Create(
      std::unique_ptr<tokenizer::Tokenizer> tokenizer, const kvx::Tokenizer& table,
      const std::string& override_template);

  const tokenizer::Tokenizer& tokenizer() const { return *tokenizer_; }

  // How chat is rendered, for the server's start-up line.
  const std::string& chat_format() const { return chat_format_; }

  absl::StatusOr<std::vector<int32_t>> EncodePrompt(absl::string_view text) const override;
  // A template without tool support gets the tools and tool turns written
  // into its messages (ToolPrompt.h).
  absl::StatusOr<std::vector<int32_t>> EncodeChat(
      absl::Span<const ChatMessage> messages, const nlohmann::ordered_json& tools) const override;
  ToolCallFormat tool_call_format() const override { return tool_support_.format; }
  std::string Decode(absl::Span<const int32_t> tokens) const override;
  std::string TokenBytes(int32_t token) const override;
  std::unique_ptr<TokenTextStream> NewTextStream() const override;
  std::vector<int32_t> EndOfGenerationTokens() const override;
  int32_t vocab_size() const override { return tokenizer_->vocab_size(); }
  // Builds its grammar compiler at the first grammar, which then keeps what
  // it compiled.
  absl::StatusOr<std::shared_ptr<const grammar::CompiledGrammar>> CompileGrammar(
      const grammar::GrammarSpec& spec) const override;

 private:
  explicit ServeTextCodec(std::unique_ptr<tokenizer::Tokenizer> tokenizer);

  absl::StatusOr<std::vector<int32_t>> EncodeWithTemplate(
      absl::Span<const ChatMessage> messages, const nlohmann::ordered_json& tools) const;

  std::unique_ptr<tokenizer::Tokenizer> tokenizer_;
  std::string chat_template_source_;
  // Unset: chat is rendered as ChatML.
  std::optional<chat_template::ChatTemplate> chat_template_;
  chat_template::SpecialTokens special_tokens_;
  std::string chat_format_;
  std::vector<int32_t> end_of_generation_;
  ToolTemplateSupport tool_support_;
  mutable std::mutex grammar_compiler_mutex_;
  mutable std::unique_ptr<grammar::GrammarCompiler> grammar_compiler_;
};

}  // namespace kvjit::serve

#endif  // KVJIT_TOOLS_SERVE_SERVETEXTCODEC_H_
