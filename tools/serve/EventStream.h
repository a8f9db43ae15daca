#ifndef KVJIT_TOOLS_SERVE_EVENTSTREAM_H_
#define KVJIT_TOOLS_SERVE_EVENTSTREAM_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "httplib.h"
#include "tools/serve/OpenAiResponses.h"
#include "tools/serve/PeerConnection.h"
#include "tools/serve/RequestStream.h"
#include "tools/serve/ToolCallDeltas.h"

namespace kvjit::serve {

// Answers `response` with a running request's output as server-sent events,
// the format the openai client reads: each choice's opening chunk, a
// `data: {chunk}` event per delta (`early_deltas` first), the usage chunk
// when asked, then `data: [DONE]`. An error after the stream began comes as
// a `data: {"error": ...}` event before [DONE]. When a write fails or the
// client closes the connection, the request is cancelled. With
// `tool_calls`, each delta is split into content and calls first.
void StartEventStream(std::shared_ptr<RequestStream> stream, ResponseBuilder builder,
                      PeerConnection peer, std::vector<ChoiceDelta> early_deltas,
                      int64_t num_choices, bool include_usage,
                      std::optional<ToolCallDeltas> tool_calls, httplib::Response& response);

}  // namespace kvjit::serve

#endif  // KVJIT_TOOLS_SERVE_EVENTSTREAM_H_
