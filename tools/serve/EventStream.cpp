#include "tools/serve/EventStream.h"

#include <chrono>
#include <string>
#include <utility>

#include "tools/serve/ApiError.h"

namespace kvjit::serve {
namespace {

// What the content provider keeps between the handler and the writes,
// which cpp-httplib runs after the handler has returned.
struct EventStreamState {
  std::shared_ptr<RequestStream> stream;
  ResponseBuilder builder;
  PeerConnection peer;
  std::vector<ChoiceDelta> early_deltas;
  int64_t num_choices;
  bool include_usage;
  std::optional<ToolCallDeltas> tool_calls;
};

bool WriteEvent(httplib::DataSink& sink, const std::string& data) {
  const std::string event = "data: " + data + "\n\n";
  return sink.write(event.data(), event.size());
}

// Writes the whole stream; false when the client went away.
bool WriteStream(EventStreamState& state, httplib::DataSink& sink) {
  for (int64_t i = 0; i < state.num_choices; ++i) {
    const nlohmann::json opening = state.builder.OpeningChunk(i, state.include_usage);
    if (!opening.is_null() && !WriteEvent(sink, DumpJson(opening))) return false;
  }
  RequestStream::Update update;
  update.deltas = std::move(state.early_deltas);
  while (true) {
    for (ChoiceDelta& delta : update.deltas) {
      if (state.tool_calls) {
        delta = state.tool_calls->Transform(std::move(delta));
        // Held text: nothing to say yet.
        if (delta.text.empty() && delta.tool_calls.empty() && delta.logprobs.empty() &&
            !delta.finish) {
          continue;
        }
      }
      if (!WriteEvent(sink, DumpJson(state.builder.Chunk(delta, state.include_usage)))) {
        return false;
      }
    }
    if (!update.error.ok()) {
      return WriteEvent(sink, DumpJson(ErrorBody(update.error))) && WriteEvent(sink, "[DONE]");
    }
    if (update.complete) {
      if (state.include_usage &&
          !WriteEvent(sink, DumpJson(state.builder.UsageChunk(update.usage)))) {
        return false;
      }
      return WriteEvent(sink, "[DONE]");
    }
    if (state.peer.Closed()) return false;
    update = state.stream->Wait(kClientCheckInterval);
  }
}

}  // namespace

void StartEventStream(std::shared_ptr<RequestStream> stream, ResponseBuilder builder,
                      PeerConnection peer, std::vector<ChoiceDelta> early_deltas,
                      int64_t num_choices, bool include_usage,
                      std::optional<ToolCallDeltas> tool_calls, httplib::Response& response) {
  auto state = std::make_shared<EventStreamState>(
      EventStreamState{std::move(stream), std::move(builder), peer, std::move(early_deltas),
                       num_choices, include_usage, std::move(tool_calls)});
  response.set_header("Cache-Control", "no-cache");
  response.set_chunked_content_provider(
      "text/event-stream",
      [state](size_t, httplib::DataSink& sink) {
        if (!WriteStream(*state, sink)) {
          state->stream->Cancel();
          return false;
        }
        sink.done();
        return true;
      },
      // The response ends (written or abandoned): a request still running
      // has no one to answer.
      [state](bool) { state->stream->Cancel(); });
}

}  // namespace kvjit::serve
