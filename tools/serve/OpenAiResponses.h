#ifndef KVJIT_TOOLS_SERVE_OPENAIRESPONSES_H_
#define KVJIT_TOOLS_SERVE_OPENAIRESPONSES_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "tools/serve/CompletionRequest.h"
#include "tools/serve/RequestStream.h"
#include "tools/serve/TextCodec.h"

// The JSON objects of OpenAI's completion and chat completion responses,
// whole and as stream chunks, in the shapes the openai client reads.
namespace kvjit::serve {

// What every object of one response shares.
struct ResponseHeader {
  ApiKind kind = ApiKind::kCompletion;
  std::string id;  // "cmpl-..." or "chatcmpl-..."
  int64_t created = 0;  // Unix seconds
  std::string model;
};

// One choice's output so far, as the deltas built it.
struct ChoiceText {
  std::string text;
  std::vector<TokenLogprob> logprobs;
  std::vector<ToolCall> tool_calls;
  std::optional<ChoiceFinish> finish;

  void Add(const ChoiceDelta& delta);
};

// Builds a response's JSON. Completions' log-probabilities carry each
// token's offset in the choice's text, so the builder keeps one running
// offset per choice, starting after the echoed prompt.
class ResponseBuilder {
 public:
  // `codec` names the tokens of log-probabilities and must outlive this.
  ResponseBuilder(ResponseHeader header, const TextCodec& codec, int64_t num_choices,
                  std::string echo_text);

  // The whole response: choices (index order), usage and the server's timings.
  nlohmann::json Response(const std::vector<ChoiceText>& choices, const RequestUsage& usage);

  // The first chunk of each choice: chat's assistant role, completions'
  // echoed prompt; none (null) for completions without echo.
  nlohmann::json OpeningChunk(int64_t index, bool include_usage) const;
  // A chunk with one delta; `include_usage` adds "usage": null, as OpenAI's
  // chunks carry it when the usage chunk will follow.
  nlohmann::json Chunk(const ChoiceDelta& delta, bool include_usage);
  // The last chunk of a stream that asked for usage: no choices; usage and
  // the server's timings.
  nlohmann::json UsageChunk(const RequestUsage& usage) const;

  const ResponseHeader& header() const { return header_; }

 private:
  nlohmann::json Logprobs(const std::vector<TokenLogprob>& logprobs, int64_t index);
  nlohmann::json Object(const char* object) const;

  ResponseHeader header_;
  const TextCodec& codec_;
  std::string echo_text_;
  std::vector<int64_t> text_offsets_;
};

nlohmann::json UsageJson(const RequestUsage& usage);

// JSON text; bytes that are not UTF-8 (a token that splits a character)
// become U+FFFD instead of failing the dump.
std::string DumpJson(const nlohmann::json& json);

}  // namespace kvjit::serve

#endif  // KVJIT_TOOLS_SERVE_OPENAIRESPONSES_H_
