#ifndef KVJIT_TOOLS_SERVE_PEERCONNECTION_H_
#define KVJIT_TOOLS_SERVE_PEERCONNECTION_H_

#include <chrono>
#include <string>

namespace kvjit::serve {

// How often an HTTP thread waiting for its request's output looks whether
// the client is still there.
inline constexpr std::chrono::milliseconds kClientCheckInterval{50};

// The TCP connection an HTTP request arrived on, to tell whether its client
// has gone away while the request runs.
//
// Why it is found this way: cpp-httplib 0.11 (Debian 12's) shows a handler
// neither its socket nor whether the client closed it (later versions have
// Request::is_connection_closed). A handler knows the connection's two
// addresses, and while it runs its socket is open, so the socket is the one
// open descriptor with those addresses.
class PeerConnection {
 public:
  // The connection from remote_addr:remote_port to local_addr:local_port,
  // or one that never reports Closed when no such socket is open.
  static PeerConnection Find(const std::string& local_addr, int local_port,
                             const std::string& remote_addr, int remote_port);

  // The client closed its side of the connection or it broke: an orderly
  // end of stream, a reset, or a hang-up. Never waits.
  bool Closed() const;

  bool found() const { return socket_ >= 0; }

 private:
  explicit PeerConnection(int socket) : socket_(socket) {}

  int socket_;
};

}  // namespace kvjit::serve

#endif  // KVJIT_TOOLS_SERVE_PEERCONNECTION_H_
