#ifndef KVJIT_TOOLS_SERVE_CONNECTIONSTREAM_H_
#define KVJIT_TOOLS_SERVE_CONNECTIONSTREAM_H_

#include <array>
#include <chrono>
#include <optional>
#include <string>

#include "httplib.h"

namespace kvjit::serve {

struct ConnectionTimeouts {
  // Each wait for the client to send or take some bytes.
  std::chrono::milliseconds io{30000};
  // A request's headers, from its first byte; then its body, from the end of
  // its headers. A client that sends a byte now and then never trips a wait's
  // timeout (slowloris): these bound the whole.
  std::chrono::milliseconds headers{10000};
  std::chrono::milliseconds body{60000};
};

// One kept-alive connection's socket as cpp-httplib's Stream, bounding the
// time each request takes to arrive. cpp-httplib 0.11's own stream bounds
// only each wait, so a client that sends a byte a second holds its
// connection (and a thread) for as long as it likes.
//
// Reads wait until the current request's deadline at most and then fail, as
// at the end of the stream: cpp-httplib then answers 400 or, in the request
// line, nothing; the server tells a timeout from either by timed_out().
// Writes have no deadline (a streamed response may last minutes), only the
// per-wait timeout.
class ConnectionStream : public httplib::Stream {
 public:
  enum class Part { kHeaders, kBody };

  ConnectionStream(int socket, ConnectionTimeouts timeouts);

  // Waits up to `idle` for the next request's first byte (true), or for the
  // client to close; the request's headers are then due within
  // timeouts.headers.
  bool WaitForRequest(std::chrono::milliseconds idle);
  // The request's headers are in: its body is due within timeouts.body.
  void StartBody();

  // The part of the current request that missed its deadline, if one did.
  std::optional<Part> timed_out() const { return timed_out_; }
  // Whether any byte was written since the current request began.
  bool responded() const { return responded_; }
  const ConnectionTimeouts& timeouts() const { return timeouts_; }

  bool is_readable() const override;
  bool is_writable() const override;
  ssize_t read(char* data, size_t size) override;
  ssize_t write(const char* data, size_t size) override;
  void get_remote_ip_and_port(std::string& ip, int& port) const override;
  void get_local_ip_and_port(std::string& ip, int& port) const override;
  socket_t socket() const override { return socket_; }

 private:
  using Clock = std::chrono::steady_clock;

  // Waits for bytes until the request's deadline or the per-wait timeout;
  // records a missed deadline.
  bool WaitToRead();

  const int socket_;
  const ConnectionTimeouts timeouts_;
  Part part_ = Part::kHeaders;
  Clock::time_point deadline_;
  std::optional<Part> timed_out_;
  bool responded_ = false;
  // Bytes received and not yet read: cpp-httplib reads a request line and
  // headers a byte at a time. Kept across requests, so pipelined requests
  // are not lost.
  std::array<char, 4096> buffer_;
  size_t buffer_begin_ = 0;
  size_t buffer_end_ = 0;
};

}  // namespace kvjit::serve

#endif  // KVJIT_TOOLS_SERVE_CONNECTIONSTREAM_H_
