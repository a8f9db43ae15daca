#ifndef KVJIT_TOOLS_SERVE_HTTPSERVER_H_
#define KVJIT_TOOLS_SERVE_HTTPSERVER_H_

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "tools/serve/HttpListener.h"
#include "tools/serve/CompletionEndpoint.h"
#include "tools/serve/CompletionRequest.h"
#include "tools/serve/SchedulerThread.h"
#include "tools/serve/ServerMetrics.h"
#include "tools/serve/TextCodec.h"

namespace kvjit::serve {

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  int port = 8000;  // 0: any free port (Bind returns it)
  // When set, /v1/ requests need `Authorization: Bearer <api_key>`.
  std::string api_key;
  // The model's name in /v1/models and in responses; requests naming
  // another model get 404.
  std::string model_name;
  // Connections held at once, each on its own thread (a streaming client
  // holds one for its whole stream); past them new connections wait in the
  // listen backlog. Cut to what the open-file limit allows, raised if it can.
  int max_connections = 4096;
  // Connections one client address may hold; its next one is answered 429.
  // 0: no limit.
  int max_connections_per_address = 256;
  // A client that sends or takes nothing for this long is dropped (an idle
  // kept-alive connection after at most 5 s).
  std::chrono::seconds io_timeout{30};
  // A request's headers must arrive within header_timeout of its first
  // byte, and its body within body_timeout of its headers, else 408: bounds
  // a client that sends a byte now and then. Responses have no such bound.
  std::chrono::seconds header_timeout{10};
  std::chrono::seconds body_timeout{60};
  size_t max_body_bytes = 8 << 20;  // larger bodies get 413
  CompletionRequestLimits limits;
  bool access_log = true;  // a line per request on stderr
  bool webui = true;  // the chat page at / (see WebUi.h)
};

// kvjit's OpenAI-compatible HTTP server on cpp-httplib: POST
// /v1/completions and /v1/chat/completions, GET /v1/models, /health,
// /metrics (Prometheus) and, unless turned off, the chat page at /. Every
// error is answered with an OpenAI error object (see ApiError.h), including
// the server's own: an unknown route (404), a body over the limit (413),
// malformed HTTP (400), a request too slow to arrive (408), a client address
// with too many connections (429), and an exception in a handler (500); the
// server goes on serving after each. Slow or idle clients cannot starve the
// rest (see HttpListener).
class HttpServer {
 public:
  // `scheduler_thread`, `codec` and `metrics` must outlive the server.
  HttpServer(SchedulerThread& scheduler_thread, const TextCodec& codec, ServerMetrics& metrics,
             HttpServerOptions options);
  ~HttpServer();

  // Makes room for max_connections under the open-file limit (saying on
  // stderr what it changed or could not), then binds the address; returns
  // the port bound.
  absl::StatusOr<int> Bind();
  // Serves until Stop, which any thread may call.
  absl::Status Serve();
  void Stop();

 private:
  void Route();
  // Answers 401 unless the request carries the API key (for /v1/ paths).
  bool Authorized(const httplib::Request& request, httplib::Response& response) const;

  SchedulerThread& scheduler_thread_;
  ServerMetrics& metrics_;
  const HttpServerOptions options_;
  CompletionEndpoint completions_;
  std::unique_ptr<HttpListener> listener_;
};

}  // namespace kvjit::serve

#endif  // KVJIT_TOOLS_SERVE_HTTPSERVER_H_
