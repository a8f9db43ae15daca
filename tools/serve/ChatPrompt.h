#ifndef KVJIT_TOOLS_SERVE_CHATPROMPT_H_
#define KVJIT_TOOLS_SERVE_CHATPROMPT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "runtime/tokenizer/Tokenizer.h"
#include "tools/serve/ChatMessage.h"

// Chat prompts in ChatML (the template of SmolLM2-Instruct, Qwen2 and
// others), which `kvjit run --chat` and `kvjit serve` render for a model
// without a chat template of its own (ServeTextCodec).
namespace kvjit::serve {

// The first control token (<|im_end|>, <|eot_id|>, ...) whose text `text`
// holds, if any: text a client sent that encoding with control tokens parsed
// would turn into that token.
std::optional<std::string> FindControlTokenText(const tokenizer::Tokenizer& tokenizer,
                                                absl::string_view text);

// The tokens of `messages` in ChatML, BOS first where the model adds one,
// ending with the assistant's turn opened. When `chat_template` has a
// default system turn (SmolLM2's) and the first message is not a system
// one, that turn comes first, as the template renders it. Message contents
// are never searched for control tokens: text such as "<|im_end|>" in a
// message stays text.
absl::StatusOr<std::vector<int32_t>> EncodeChatMl(const tokenizer::Tokenizer& tokenizer,
                                                  absl::string_view chat_template,
                                                  absl::Span<const ChatMessage> messages);

}  // namespace kvjit::serve

#endif  // KVJIT_TOOLS_SERVE_CHATPROMPT_H_
