#include "tools/serve/HttpListener.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <utility>

#include "absl/strings/str_cat.h"
#include "tools/serve/ApiError.h"
#include "tools/serve/ConnectionThreads.h"
#include "tools/serve/OpenAiResponses.h"
#include "tools/serve/OpenFileLimit.h"

namespace kvjit::serve {
namespace {

// The connection whose requests this thread is serving: handlers reach it
// through the static functions (cpp-httplib shows them no stream).
thread_local ConnectionStream* current_stream = nullptr;

// How long a connection the server answered and gave up on may still send
// before it is closed (nginx's lingering_timeout, shorter): closing a socket
// with unread bytes resets the connection, and the client may lose the
// answer to the reset.
constexpr std::chrono::seconds kLinger{1};

std::string PeerAddress(int socket) {
  sockaddr_storage address{};
  socklen_t length = sizeof(address);
  char host[NI_MAXHOST];
  if (getpeername(socket, reinterpret_cast<sockaddr*>(&address), &length) != 0 ||
      getnameinfo(reinterpret_cast<const sockaddr*>(&address), length, host, sizeof(host), nullptr,
                  0, NI_NUMERICHOST) != 0) {
    return "";
  }
  return host;
}

// A whole response with OpenAI's error object, written without reading the
// request (or all of it), so the connection is closed after it.
std::string ErrorResponse(int status, absl::string_view reason, const absl::Status& error,
                          absl::string_view extra_headers = "") {
  const std::string body = DumpJson(ErrorBody(error, status));
  return absl::StrCat("HTTP/1.1 ", status, " ", reason,
                      "\r\nContent-Type: application/json\r\nContent-Length: ", body.size(),
                      "\r\nConnection: close\r\n", extra_headers, "\r\n", body);
}

// Within the socket's send timeout; a fresh connection's send buffer takes
// a short response at once.
void SendAll(int socket, const std::string& data) {
  size_t sent = 0;
  while (sent < data.size()) {
    const ssize_t written = send(socket, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0) return;
    sent += static_cast<size_t>(written);
  }
}

// Says the server is done sending, then reads and drops what the client
// still sends until it closes or kLinger passes (see kLinger).
void LingerBeforeClose(int socket) {
  shutdown(socket, SHUT_WR);
  const auto deadline = std::chrono::steady_clock::now() + kLinger;
  char discarded[4096];
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    pollfd entry{socket, POLLIN, 0};
    if (left.count() <= 0 || poll(&entry, 1, static_cast<int>(left.count())) <= 0) return;
    if (recv(socket, discarded, sizeof(discarded), MSG_DONTWAIT) <= 0) return;
  }
}

std::string Seconds(std::chrono::milliseconds duration) {
  return absl::StrCat(static_cast<double>(duration.count()) / 1000, " s");
}

absl::Status TimeoutError(ConnectionStream::Part part, const ConnectionTimeouts& timeouts) {
  if (part == ConnectionStream::Part::kHeaders) {
    return absl::DeadlineExceededError(absl::StrCat("the request's headers did not arrive within ",
                                                    Seconds(timeouts.headers),
                                                    " of its first byte (--header_timeout_s)"));
  }
  return absl::DeadlineExceededError(absl::StrCat("the request's body did not arrive within ",
                                                  Seconds(timeouts.body),
                                                  " of its headers (--body_timeout_s)"));
}

}  // namespace

HttpListener::HttpListener(HttpListenerOptions options)
    : options_(std::move(options)),
      max_connections_(options_.max_connections),
      per_address_(options_.max_connections_per_address) {
  new_task_queue = [this] { return new ConnectionThreads(max_connections_); };
}

std::string HttpListener::MakeRoomForConnections() {
  ConnectionRoom room = serve::MakeRoomForConnections(options_.max_connections);
  max_connections_ = room.connections;
  return std::move(room.note);
}

void HttpListener::DeepenBacklog() { ::listen(svr_sock_, SOMAXCONN); }

void HttpListener::StartBody() {
  if (current_stream != nullptr) current_stream->StartBody();
}

std::optional<absl::Status> HttpListener::RequestTimeout() {
  if (current_stream == nullptr || !current_stream->timed_out()) return std::nullopt;
  return TimeoutError(*current_stream->timed_out(), current_stream->timeouts());
}

bool HttpListener::process_and_close_socket(socket_t socket) {
  const std::string address = PeerAddress(socket);
  // Held until the socket is closed.
  const std::optional<ConnectionsPerAddress::Place> place = per_address_.Admit(address);
  if (!place) {
    Refuse(socket, address);
    LingerBeforeClose(socket);
  } else if (ServeRequests(socket, address)) {
    LingerBeforeClose(socket);
  }
  shutdown(socket, SHUT_RDWR);
  close(socket);
  return true;
}

bool HttpListener::ServeRequests(int socket, const std::string& address) {
  ConnectionStream stream(socket, options_.timeouts);
  current_stream = &stream;
  bool timed_out = false;
  size_t requests_left = keep_alive_max_count_;
  const std::chrono::seconds idle(keep_alive_timeout_sec_);
  // As the library's own loop: until the server stops, a request fails or
  // asks to close, or keep_alive_max_count requests.
  while (svr_sock_ != INVALID_SOCKET && requests_left > 0 && stream.WaitForRequest(idle)) {
    bool connection_closed = false;
    const bool answered = process_request(stream, requests_left == 1, connection_closed, nullptr);
    if (const std::optional<ConnectionStream::Part> part = stream.timed_out()) {
      // In the request line the library gives up without a word; in the
      // headers or body the error handler answered (RequestTimeout).
      const absl::Status error = TimeoutError(*part, options_.timeouts);
      if (!stream.responded()) SendAll(socket, ErrorResponse(408, "Request Timeout", error));
      if (options_.log_refusals) {
        std::fprintf(stderr, "kvjit serve: 408 for %s: %s\n", address.c_str(),
                     std::string(error.message()).c_str());
      }
      timed_out = true;
      break;
    }
    if (!answered || connection_closed) break;
    --requests_left;
  }
  current_stream = nullptr;
  return timed_out;
}

void HttpListener::Refuse(int socket, const std::string& address) {
  const absl::Status error = absl::ResourceExhaustedError(
      absl::StrCat(address, " has ", per_address_.limit(),
                   " connections open to this server, the most one address may hold "
                   "(--max_connections_per_address); close one, or wait for one to end"));
  SendAll(socket, ErrorResponse(429, "Too Many Requests", error, "Retry-After: 1\r\n"));
  if (options_.log_refusals) {
    std::fprintf(stderr, "kvjit serve: 429 for %s: %s\n", address.c_str(),
                 std::string(error.message()).c_str());
  }
}

}  // namespace kvjit::serve
