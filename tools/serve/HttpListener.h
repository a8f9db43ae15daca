#ifndef KVJIT_TOOLS_SERVE_HTTPLISTENER_H_
#define KVJIT_TOOLS_SERVE_HTTPLISTENER_H_

#include <chrono>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "httplib.h"
#include "tools/serve/ConnectionStream.h"
#include "tools/serve/ConnectionsPerAddress.h"

namespace kvjit::serve {

struct HttpListenerOptions {
  int max_connections = 4096;
  int max_connections_per_address = 256;  // 0: no limit
  ConnectionTimeouts timeouts;
  bool log_refusals = true;  // a line on stderr per connection refused or timed out
};

// cpp-httplib's server with connections that slow clients cannot starve:
// each connection gets its own thread (ConnectionThreads), up to
// max_connections; an address holding max_connections_per_address gets 429
// for its next connection before a byte of it is read; and a request whose
// headers or body outlast their deadline (ConnectionStream) gets 408 and
// its connection is closed. Route and configure it as an httplib::Server,
// keep-alive and per-wait timeouts included.
class HttpListener : public httplib::Server {
 public:
  explicit HttpListener(HttpListenerOptions options);

  // Makes room for max_connections under the process's open-file limit,
  // raising it or cutting them to fit (see OpenFileLimit.h); returns what it
  // changed or could not, for the log, or "". Call before listening.
  std::string MakeRoomForConnections();

  // The library listens with a backlog of 5 (CPPHTTPLIB_LISTEN_BACKLOG,
  // fixed in Debian's prebuilt library); connections beyond it wait for the
  // client's SYN retry, a second or more. Call after binding.
  void DeepenBacklog();

  // For handlers, on the thread serving the request: its headers are read,
  // from now its body is due (see ConnectionStream).
  static void StartBody();
  // The 408 error for this thread's request when it missed its deadline.
  static std::optional<absl::Status> RequestTimeout();

 private:
  // Overrides the library's connection loop (a virtual it leaves private)
  // with one that reads through ConnectionStream and counts addresses.
  bool process_and_close_socket(socket_t socket) override;
  // Serves requests on `socket` (from `address`) until it closes, is idle
  // past the keep-alive timeout, or a request misses its deadline (then
  // true).
  bool ServeRequests(int socket, const std::string& address);
  void Refuse(int socket, const std::string& address);

  const HttpListenerOptions options_;
  int max_connections_;
  ConnectionsPerAddress per_address_;
};

}  // namespace kvjit::serve

#endif  // KVJIT_TOOLS_SERVE_HTTPLISTENER_H_
