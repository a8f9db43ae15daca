#include "tools/serve/CompletionEndpoint.h"

#include <ctime>
#include <memory>
#include <optional>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "runtime/core/StatusMacros.h"
#include "tools/serve/ApiError.h"
#include "tools/serve/EventStream.h"
#include "tools/serve/OpenAiResponses.h"
#include "tools/serve/PeerConnection.h"
#include "tools/serve/ToolCallDeltas.h"
#include "tools/serve/ToolCallGrammar.h"

namespace kvjit::serve {
namespace {

using Clock = std::chrono::steady_clock;

// completions' default max_tokens, as OpenAI's and vLLM's.
constexpr int64_t kDefaultCompletionTokens = 16;

uint64_t RandomBits() {
  thread_local std::mt19937_64 random(std::random_device{}());
  return random();
}

ResponseHeader NewHeader(ApiKind kind, const std::string& model) {
  ResponseHeader header;
  header.kind = kind;
  header.id = absl::StrFormat("%s-%016x", kind == ApiKind::kChatCompletion ? "chatcmpl" : "cmpl",
                              RandomBits());
  header.created = static_cast<int64_t>(std::time(nullptr));
  header.model = model;
  return header;
}

const char* PromptField(const CompletionRequest& request) {
  return request.kind == ApiKind::kChatCompletion ? "messages" : "prompt";
}

// Waits until the scheduler thread runs the request or refuses it, or the
// client leaves (then the request is cancelled and nothing is answered).
RequestStream::Update WaitUntilStarted(RequestStream& stream, const PeerConnection& peer,
                                       std::vector<ChoiceDelta>* early_deltas, bool* client_left) {
  while (true) {
    RequestStream::Update update = stream.Wait(kClientCheckInterval);
    early_deltas->insert(early_deltas->end(), update.deltas.begin(), update.deltas.end());
    if (update.accepted || update.finished()) return update;
    if (peer.Closed()) {
      stream.Cancel();
      *client_left = true;
      return update;
    }
  }
}

}  // namespace

void ReplyWithError(const absl::Status& error, httplib::Response& response, int http_status) {
  response.status = http_status != 0 ? http_status : HttpStatusFor(error);
  if (response.status == 429 || response.status == 503) response.set_header("Retry-After", "1");
  response.set_content(DumpJson(ErrorBody(error, response.status)), "application/json");
}

absl::StatusOr<std::vector<int32_t>> CompletionEndpoint::PromptTokens(
    const CompletionRequest& request) const {
  if (request.kind == ApiKind::kChatCompletion) {
    const nlohmann::ordered_json no_tools = nlohmann::ordered_json::array();
    absl::StatusOr<std::vector<int32_t>> tokens =
        codec_.EncodeChat(request.messages, request.tools.active() ? request.tools.tools : no_tools);
    if (!tokens.ok()) return WithField(tokens.status(), "messages");
    return tokens;
  }
  if (request.prompt_text.has_value()) {
    absl::StatusOr<std::vector<int32_t>> tokens = codec_.EncodePrompt(*request.prompt_text);
    if (!tokens.ok()) return WithField(tokens.status(), "prompt");
    return tokens;
  }
  const std::vector<int32_t>& tokens = *request.prompt_token_ids;
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] >= codec_.vocab_size()) {
      return FieldError("prompt", absl::StrCat("token ", i, " is ", tokens[i],
                                               ", outside the vocabulary of ",
                                               codec_.vocab_size()));
    }
  }
  return tokens;
}

absl::StatusOr<TokenizedRequest> CompletionEndpoint::ToTokenizedRequest(
    const CompletionRequest& request, Clock::time_point arrival) const {
  TokenizedRequest tokenized_request;
  tokenized_request.arrival = arrival;
  KVJIT_ASSIGN_OR_RETURN(tokenized_request.prompt, PromptTokens(request));
  const int64_t context = scheduler_thread_.options().context_length;
  const int64_t prompt_tokens = static_cast<int64_t>(tokenized_request.prompt.size());
  if (prompt_tokens == 0) return FieldError(PromptField(request), "holds no tokens");
  if (prompt_tokens >= context) {
    return FieldError(PromptField(request),
                      absl::StrCat("this model's maximum context length is ", context,
                                   " tokens, and the ", PromptField(request), " take ",
                                   prompt_tokens, " of them, leaving none to generate"));
  }
  const int64_t room = context - prompt_tokens;
  int64_t max_tokens = room;
  if (request.max_tokens.has_value()) {
    if (*request.max_tokens > room) {
      return FieldError("max_tokens",
                        absl::StrCat("this model's maximum context length is ", context,
                                     " tokens; you asked for ", prompt_tokens + *request.max_tokens,
                                     " (", prompt_tokens, " in the ", PromptField(request), ", ",
                                     *request.max_tokens, " in the completion)"));
    }
    max_tokens = *request.max_tokens;
  } else if (request.kind == ApiKind::kCompletion) {
    max_tokens = std::min(room, kDefaultCompletionTokens);
  }

  sampling::StopConditions& stop = tokenized_request.stop;
  if (!request.ignore_eos) stop.stop_token_ids = codec_.EndOfGenerationTokens();
  for (int32_t id : request.stop_token_ids) {
    if (id >= codec_.vocab_size()) {
      return FieldError("stop_token_ids", absl::StrCat(id, " is outside the vocabulary of ",
                                                       codec_.vocab_size()));
    }
    stop.stop_token_ids.push_back(id);
  }
  stop.stop_strings = request.stop;
  stop.max_tokens = max_tokens;

  tokenized_request.sampling = request.sampling;
  tokenized_request.sampling.seed = request.seed.value_or(RandomBits());
  tokenized_request.num_choices = request.n;
  tokenized_request.top_logprobs = request.top_logprobs;
  if (request.structured_output.has_value()) {
    absl::StatusOr<std::shared_ptr<const grammar::CompiledGrammar>> grammar =
        codec_.CompileGrammar(request.structured_output->spec);
    if (!grammar.ok()) return WithField(grammar.status(), request.structured_output->field);
    tokenized_request.grammar = *std::move(grammar);
  }
  // A forced call is decoded under its grammar, so that even a small model
  // answers with a valid call.
  if (request.tools.active() && (request.tools.choice == ToolRequest::Choice::kRequired ||
                                 request.tools.choice == ToolRequest::Choice::kNamed)) {
    absl::StatusOr<std::shared_ptr<const grammar::CompiledGrammar>> grammar =
        codec_.CompileGrammar(ForcedToolCallGrammar(request.tools, codec_.tool_call_format()));
    if (!grammar.ok()) return WithField(grammar.status(), "tools");
    tokenized_request.grammar = *std::move(grammar);
  }
  if (request.beam_search.has_value()) {
    runtime::BeamSearchParams beam;
    beam.request_id = "beam search request";
    beam.num_beams = static_cast<int32_t>(request.beam_search->beam_width);
    beam.num_return_sequences = static_cast<int32_t>(request.n);
    beam.length_penalty = request.beam_search->length_penalty;
    beam.early_stopping = request.beam_search->early_stopping;
    beam.max_new_tokens = max_tokens;
    beam.eos_token_ids = stop.stop_token_ids;
    beam.grammar = tokenized_request.grammar;
    tokenized_request.beam_search = std::move(beam);
  }
  return tokenized_request;
}

void CompletionEndpoint::Handle(ApiKind kind, const httplib::Request& http_request,
                                httplib::Response& response) const {
  const Clock::time_point arrival = Clock::now();
  absl::StatusOr<CompletionRequest> request =
      ParseCompletionRequest(kind, http_request.body, limits_);
  if (!request.ok()) return ReplyWithError(request.status(), response);
  if (!request->model.empty() && request->model != model_name_) {
    return ReplyWithError(
        WithField(absl::NotFoundError(absl::StrCat("the model '", request->model,
                                                   "' does not exist; this server serves '",
                                                   model_name_, "'")),
                  "model"),
        response);
  }
  absl::StatusOr<TokenizedRequest> tokenized_request = ToTokenizedRequest(*request, arrival);
  if (!tokenized_request.ok()) return ReplyWithError(tokenized_request.status(), response);
  const int64_t num_choices = tokenized_request->num_choices;
  absl::StatusOr<std::shared_ptr<RequestStream>> stream =
      scheduler_thread_.Submit(*std::move(tokenized_request));
  if (!stream.ok()) return ReplyWithError(stream.status(), response);

  const PeerConnection peer =
      PeerConnection::Find(http_request.local_addr, http_request.local_port,
                           http_request.remote_addr, http_request.remote_port);
  std::vector<ChoiceDelta> early_deltas;
  bool client_left = false;
  RequestStream::Update started = WaitUntilStarted(**stream, peer, &early_deltas, &client_left);
  if (client_left) return;
  if (!started.error.ok()) return ReplyWithError(started.error, response);

  std::string echo_text;
  if (request->echo) {
    echo_text = request->prompt_text ? *request->prompt_text
                                     : codec_.Decode(*request->prompt_token_ids);
  }
  ResponseBuilder builder(NewHeader(kind, model_name_), codec_, num_choices, std::move(echo_text));
  std::optional<ToolCallDeltas> tool_calls;
  if (request->tools.active()) tool_calls.emplace(codec_.tool_call_format(), num_choices);
  if (request->stream) {
    StartEventStream(*std::move(stream), std::move(builder), peer, std::move(early_deltas),
                     num_choices, request->include_usage, std::move(tool_calls), response);
    return;
  }

  std::vector<ChoiceText> choices(num_choices);
  RequestStream::Update update = std::move(started);
  update.deltas = std::move(early_deltas);
  while (true) {
    for (ChoiceDelta& delta : update.deltas) {
      if (tool_calls) delta = tool_calls->Transform(std::move(delta));
      choices[delta.index].Add(delta);
    }
    if (!update.error.ok()) return ReplyWithError(update.error, response);
    if (update.complete) break;
    if (peer.Closed()) return (*stream)->Cancel();
    update = (*stream)->Wait(kClientCheckInterval);
  }
  // Beam search may find fewer hypotheses than n.
  while (!choices.empty() && !choices.back().finish) choices.pop_back();
  response.set_content(DumpJson(builder.Response(choices, update.usage)), "application/json");
}

}  // namespace kvjit::serve
