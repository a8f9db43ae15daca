#include "tools/serve/ChatPrompt.h"

#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "runtime/core/StatusMacros.h"

namespace kvjit::serve {
namespace {

constexpr absl::string_view kSmolLmDefaultSystem =
    "You are a helpful AI assistant named SmolLM, trained by Hugging Face";

// A span of the rendered prompt: the template's own text, whose control
// tokens are tokens, or a message's content, which is only ever text.
struct PromptPiece {
  std::string text;
  bool is_markup;
};

std::vector<PromptPiece> RenderChatMl(absl::string_view chat_template,
                                      absl::Span<const ChatMessage> messages) {
  std::vector<PromptPiece> pieces;
  if (absl::StrContains(chat_template, kSmolLmDefaultSystem) &&
      (messages.empty() || messages.front().role != "system")) {
    pieces.push_back(
        {absl::StrCat("<|im_start|>system\n", kSmolLmDefaultSystem, "<|im_end|>\n"), true});
  }
  for (const ChatMessage& message : messages) {
    pieces.push_back({absl::StrCat("<|im_start|>", message.role, "\n"), true});
    pieces.push_back({message.content, false});
    pieces.push_back({"<|im_end|>\n", true});
  }
  pieces.push_back({"<|im_start|>assistant\n", true});
  return pieces;
}

}  // namespace

std::optional<std::string> FindControlTokenText(const tokenizer::Tokenizer& tokenizer,
                                                absl::string_view text) {
  const tokenizer::Vocabulary& vocabulary = tokenizer.vocabulary();
  for (size_t id = 0; id < vocabulary.tokens.size(); ++id) {
    if (id < vocabulary.token_types.size() &&
        vocabulary.token_types[id] == tokenizer::TokenType::kControl &&
        !vocabulary.tokens[id].empty() && absl::StrContains(text, vocabulary.tokens[id])) {
      return vocabulary.tokens[id];
    }
  }
  return std::nullopt;
}

absl::StatusOr<std::vector<int32_t>> EncodeChatMl(const tokenizer::Tokenizer& tokenizer,
                                                  absl::string_view chat_template,
                                                  absl::Span<const ChatMessage> messages) {
  const std::vector<PromptPiece> pieces = RenderChatMl(chat_template, messages);
  bool contents_hold_control_text = false;
  std::string whole;
  for (const PromptPiece& piece : pieces) {
    whole += piece.text;
    if (!piece.is_markup && FindControlTokenText(tokenizer, piece.text).has_value()) {
      contents_hold_control_text = true;
    }
  }
  // The whole text at once gives exactly the tokens Hugging Face's
  // tokenizer gives the rendered template; only where a message spells a
  // control token is each piece encoded alone, the message as plain text.
  if (!contents_hold_control_text) {
    return tokenizer.Encode(whole, /*add_special=*/true, /*parse_special=*/true);
  }
  const tokenizer::Vocabulary& vocabulary = tokenizer.vocabulary();
  std::vector<int32_t> tokens;
  if (vocabulary.add_bos_token) tokens.push_back(tokenizer.bos_id());
  for (const PromptPiece& piece : pieces) {
    KVJIT_ASSIGN_OR_RETURN(std::vector<int32_t> piece_tokens,
                           tokenizer.Encode(piece.text, /*add_special=*/false,
                                            /*parse_special=*/piece.is_markup));
    tokens.insert(tokens.end(), piece_tokens.begin(), piece_tokens.end());
  }
  if (vocabulary.add_eos_token) tokens.push_back(tokenizer.eos_id());
  return tokens;
}

}  // namespace kvjit::serve
