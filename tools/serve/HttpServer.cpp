#include "tools/serve/HttpServer.h"

#include <signal.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <exception>
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "httplib.h"
#include "tools/serve/ApiError.h"
#include "tools/serve/OpenAiResponses.h"
#include "tools/serve/WebUi.h"

namespace kvjit::serve {

HttpServer::HttpServer(SchedulerThread& scheduler_thread, const TextCodec& codec,
                       ServerMetrics& metrics, HttpServerOptions options)
    : scheduler_thread_(scheduler_thread),
      metrics_(metrics),
      options_(std::move(options)),
      completions_(scheduler_thread, codec, options_.model_name, options_.limits),
      listener_(std::make_unique<HttpListener>(HttpListenerOptions{
          options_.max_connections, options_.max_connections_per_address,
          ConnectionTimeouts{options_.io_timeout, options_.header_timeout, options_.body_timeout},
          options_.access_log})) {
  Route();
}

HttpServer::~HttpServer() { Stop(); }

bool HttpServer::Authorized(const httplib::Request& request, httplib::Response& response) const {
  if (options_.api_key.empty() || !absl::StartsWith(request.path, "/v1/")) return true;
  if (request.get_header_value("Authorization") == "Bearer " + options_.api_key) return true;
  ReplyWithError(absl::UnauthenticatedError(
                     "a valid API key is required: send `Authorization: Bearer <key>`"),
                 response);
  return false;
}

void HttpServer::Route() {
  httplib::Server& server = *listener_;
  server.set_read_timeout(options_.io_timeout);
  server.set_write_timeout(options_.io_timeout);
  // An idle kept-alive connection holds a thread, and stopping the server
  // waits for it: uvicorn's (vLLM's) 5 seconds bound both.
  server.set_keep_alive_timeout(std::min<time_t>(5, options_.io_timeout.count()));
  server.set_keep_alive_max_count(1000);
  server.set_payload_max_length(options_.max_body_bytes);

  server.set_pre_routing_handler([this](const httplib::Request& request,
                                        httplib::Response& response) {
    // The server answers no byte ranges (RFC 9110 lets it ignore Range):
    // cpp-httplib 0.11 cuts a response to the ranges the request parsed
    // without checking them against its length, reading past its end. The
    // request is the library's own non-const object, handed on as const.
    const_cast<httplib::Request&>(request).ranges.clear();
    // The headers are in; the body, if any, is read after this handler.
    HttpListener::StartBody();
    return Authorized(request, response) ? httplib::Server::HandlerResponse::Unhandled
                                         : httplib::Server::HandlerResponse::Handled;
  });
  server.Post("/v1/completions", [this](const httplib::Request& request,
                                        httplib::Response& response) {
    completions_.Handle(ApiKind::kCompletion, request, response);
  });
  server.Post("/v1/chat/completions", [this](const httplib::Request& request,
                                             httplib::Response& response) {
    completions_.Handle(ApiKind::kChatCompletion, request, response);
  });
  server.Get("/v1/models", [this](const httplib::Request&, httplib::Response& response) {
    const nlohmann::json model = {{"id", options_.model_name},
                                  {"object", "model"},
                                  {"created", static_cast<int64_t>(std::time(nullptr))},
                                  {"owned_by", "kvjit"},
                                  {"max_model_len", scheduler_thread_.options().context_length}};
    response.set_content(DumpJson({{"object", "list"}, {"data", {model}}}), "application/json");
  });
  server.Get("/health", [](const httplib::Request&, httplib::Response& response) {
    response.set_content(R"({"status":"ok"})", "application/json");
  });
  server.Get("/metrics", [this](const httplib::Request&, httplib::Response& response) {
    response.set_content(metrics_.RenderPrometheus(), "text/plain; version=0.0.4");
  });
  if (options_.webui) RouteWebUi(server);

  // The library's own errors (no route, body too large, unreadable HTTP)
  // come with no body; give them OpenAI's error object.
  server.set_error_handler(httplib::Server::HandlerWithResponse([this](
                                                                   const httplib::Request& request,
                                                                   httplib::Response& response) {
    if (!response.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    // The library answers 400 to a request cut off by its deadline.
    if (std::optional<absl::Status> timeout = HttpListener::RequestTimeout()) {
      ReplyWithError(*timeout, response, 408);
      response.set_header("Connection", "close");
      return httplib::Server::HandlerResponse::Handled;
    }
    absl::Status error;
    switch (response.status) {
      case 404:
        error = absl::NotFoundError(absl::StrCat("no route for ", request.method, " ",
                                                 request.path));
        break;
      case 413:
        // cpp-httplib parses a form-encoded body (curl -d's default type)
        // and caps it at its own 8 KiB.
        error = absl::InvalidArgumentError(
            request.get_header_value("Content-Type") == "application/x-www-form-urlencoded"
                ? "a form-encoded body (Content-Type: application/x-www-form-urlencoded, curl "
                  "-d's default) may hold 8192 bytes at most; send the JSON with Content-Type: "
                  "application/json"
                : absl::StrCat("the request body is larger than this server's limit of ",
                               options_.max_body_bytes, " bytes"));
        break;
      default:
        error = absl::InvalidArgumentError(
            absl::StrCat("the HTTP request could not be read (", response.status, ")"));
    }
    ReplyWithError(error, response, response.status);
    return httplib::Server::HandlerResponse::Handled;
  }));
  server.set_exception_handler([](const httplib::Request& request, httplib::Response& response,
                                  std::exception_ptr thrown) {
    std::string what = "unknown exception";
    try {
      std::rethrow_exception(thrown);
    } catch (const std::exception& exception) {
      what = exception.what();
    } catch (...) {
    }
    std::fprintf(stderr, "kvjit serve: %s %s failed: %s\n", request.method.c_str(),
                 request.path.c_str(), what.c_str());
    ReplyWithError(absl::InternalError(absl::StrCat("the server failed: ", what)), response);
  });
  if (options_.access_log) {
    server.set_logger([](const httplib::Request& request, const httplib::Response& response) {
      std::fprintf(stderr, "kvjit serve: %s %s %d\n", request.method.c_str(),
                   request.path.c_str(), response.status);
    });
  }
}

absl::StatusOr<int> HttpServer::Bind() {
  // A write to a client that went away must fail (and cancel its request),
  // not end the process.
  signal(SIGPIPE, SIG_IGN);
  if (const std::string note = listener_->MakeRoomForConnections(); !note.empty()) {
    std::fprintf(stderr, "kvjit serve: %s\n", note.c_str());
  }
  int port = options_.port;
  if (port == 0) {
    port = listener_->bind_to_any_port(options_.host);
    if (port < 0) port = 0;
  } else if (!listener_->bind_to_port(options_.host, port)) {
    port = 0;
  }
  if (port == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", options_.host, ":",
                                               options_.port, " (in use, or not an address "
                                               "of this machine)"));
  }
  listener_->DeepenBacklog();
  return port;
}

absl::Status HttpServer::Serve() {
  if (!listener_->listen_after_bind()) {
    return absl::InternalError("the HTTP server stopped with an error");
  }
  return absl::OkStatus();
}

void HttpServer::Stop() { listener_->stop(); }

}  // namespace kvjit::serve
