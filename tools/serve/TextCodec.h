#ifndef KVJIT_TOOLS_SERVE_TEXTCODEC_H_
#define KVJIT_TOOLS_SERVE_TEXTCODEC_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "runtime/grammar/GrammarCompiler.h"
#include "runtime/grammar/GrammarSpec.h"
#include "nlohmann/json.hpp"
#include "tools/serve/ChatMessage.h"
#include "tools/serve/ToolCallParser.h"

namespace kvjit::serve {

// Turns one choice's generated tokens into text as they arrive; each chunk
// is whole UTF-8 characters.
class TokenTextStream {
 public:
  virtual ~TokenTextStream() = default;
  // The text `token` completes (empty while a character is still partial).
  virtual std::string Push(int32_t token) = 0;
  // What is still held back, for the end of the choice.
  virtual std::string Flush() = 0;
};

// The model's text side, as the server needs it: ServeTextCodec implements
// it over the executable's tokenizer and chat template, and the server's
// tests over a fake vocabulary. Every method may be called from several
// threads at once.
class TextCodec {
 public:
  virtual ~TextCodec() = default;

  // A completion prompt's tokens, BOS first where the model adds one. The
  // text is never searched for control tokens: a client cannot inject them.
  virtual absl::StatusOr<std::vector<int32_t>> EncodePrompt(absl::string_view text) const = 0;

  // A conversation rendered by the model's chat template, ending with the
  // assistant's turn opened, with `tools` (OpenAI's list; empty for none)
  // shown to the model. Message contents are never searched for control
  // tokens.
  virtual absl::StatusOr<std::vector<int32_t>> EncodeChat(
      absl::Span<const ChatMessage> messages, const nlohmann::ordered_json& tools) const = 0;

  // The format the model's replies call functions in.
  virtual ToolCallFormat tool_call_format() const = 0;

  // The text of `tokens` (a prompt given as token ids, for echo).
  virtual std::string Decode(absl::Span<const int32_t> tokens) const = 0;

  // The bytes one token stands for, as log-probabilities name tokens.
  virtual std::string TokenBytes(int32_t token) const = 0;

  virtual std::unique_ptr<TokenTextStream> NewTextStream() const = 0;

  // EOS, end of turn and the other tokens that end a generation.
  virtual std::vector<int32_t> EndOfGenerationTokens() const = 0;

  virtual int32_t vocab_size() const = 0;

  // `spec` compiled against the vocabulary, for structured outputs: an
  // InvalidArgument error naming what is wrong with it, a FailedPrecondition
  // one where the codec cannot compile grammars.
  virtual absl::StatusOr<std::shared_ptr<const grammar::CompiledGrammar>> CompileGrammar(
      const grammar::GrammarSpec& spec) const = 0;
};

}  // namespace kvjit::serve

#endif  // KVJIT_TOOLS_SERVE_TEXTCODEC_H_
