#ifndef KVJIT_TOOLS_SERVE_COMPLETIONREQUEST_H_
#define KVJIT_TOOLS_SERVE_COMPLETIONREQUEST_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "runtime/generation/BeamSearch.h"
#include "runtime/sampling/Sampler.h"
#include "tools/serve/ChatMessage.h"
#include "tools/serve/StructuredOutputRequest.h"
#include "tools/serve/ToolRequest.h"

namespace kvjit::serve {

// Which OpenAI endpoint a request came to.
enum class ApiKind {
  kCompletion,      // POST /v1/completions
  kChatCompletion,  // POST /v1/chat/completions
};

// How many choices, log-probability alternatives and stop strings one
// completion request may ask for, so that one request cannot take the
// server over.
struct CompletionRequestLimits {
  int64_t max_choices = 16;      // n, and the beam width
  int64_t max_logprobs = 20;     // alternatives per token (vLLM's max_logprobs)
  int64_t max_stop_strings = 16;
};

// vLLM's beam search extension: `use_beam_search`, with `best_of` beams
// (n when absent), `length_penalty` and `early_stopping`.
struct BeamSearchRequest {
  int64_t beam_width = 1;
  double length_penalty = 1.0;
  runtime::EarlyStopping early_stopping = runtime::EarlyStopping::kHeuristic;
};

// A request to /v1/completions or /v1/chat/completions, its fields read,
// typed and range-checked. What needs the model (tokenizing, the context
// length, the vocabulary) is checked later.
struct CompletionRequest {
  ApiKind kind = ApiKind::kCompletion;
  std::string model;  // empty when not given

  // kCompletion: the prompt, as text or as token ids (exactly one is set).
  std::optional<std::string> prompt_text;
  std::optional<std::vector<int32_t>> prompt_token_ids;
  // kChatCompletion: the conversation, never empty.
  std::vector<ChatMessage> messages;

  // max_completion_tokens, else max_tokens; nullopt: the endpoint's default.
  std::optional<int64_t> max_tokens;
  // The seed is random unless the request gives one.
  sampling::SamplingParams sampling;
  std::optional<uint64_t> seed;
  std::vector<std::string> stop;
  // vLLM's extensions: more tokens that end a choice, and generating past
  // the model's end-of-generation tokens.
  std::vector<int32_t> stop_token_ids;
  bool ignore_eos = false;
  int64_t n = 1;
  // Log-probabilities of each generated token and its top alternatives:
  // nullopt for none, else the number of alternatives (completions'
  // `logprobs`; chat's `logprobs` with `top_logprobs`).
  std::optional<int64_t> top_logprobs;
  bool echo = false;  // completions: the prompt in front of the text
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  std::optional<BeamSearchRequest> beam_search;
  // What the output must match (response_format and the like).
  std::optional<StructuredOutput> structured_output;
  // Chat: the functions the model may call.
  ToolRequest tools;
};

// Reads a request body. Malformed JSON, a field of the wrong type or out of
// range, a missing prompt or messages, and features the server does not
// offer are errors naming the field (see ApiError.h); fields it does not
// know are ignored.
absl::StatusOr<CompletionRequest> ParseCompletionRequest(ApiKind kind, absl::string_view body,
                                                         const CompletionRequestLimits& limits);

}  // namespace kvjit::serve

#endif  // KVJIT_TOOLS_SERVE_COMPLETIONREQUEST_H_
