#include "tools/serve/ConnectionStream.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace kvjit::serve {
namespace {

// poll() for `events` up to `timeout`; true once they came.
bool Await(int socket, short events, std::chrono::milliseconds timeout) {
  pollfd entry{socket, events, 0};
  int ready;
  do {
    ready = poll(&entry, 1, static_cast<int>(std::max<int64_t>(0, timeout.count())));
  } while (ready < 0 && errno == EINTR);
  return ready > 0;
}

// The client has not closed its side: nothing to read, or bytes (not the
// end of the stream). As cpp-httplib's own stream checks before each write.
bool PeerOpen(int socket) {
  if (!Await(socket, POLLIN, std::chrono::milliseconds(0))) return true;
  char byte;
  return recv(socket, &byte, 1, MSG_PEEK | MSG_DONTWAIT) > 0;
}

// The address and port as cpp-httplib writes them (numeric, getnameinfo),
// which PeerConnection matches.
void AddressAndPort(const sockaddr_storage& address, socklen_t length, std::string& ip, int& port) {
  char host[NI_MAXHOST];
  char service[NI_MAXSERV];
  if (getnameinfo(reinterpret_cast<const sockaddr*>(&address), length, host, sizeof(host), service,
                  sizeof(service), NI_NUMERICHOST | NI_NUMERICSERV) == 0) {
    ip = host;
    port = std::atoi(service);
  }
}

ssize_t Receive(int socket, char* data, size_t size) {
  ssize_t received;
  do {
    received = recv(socket, data, size, 0);
  } while (received < 0 && errno == EINTR);
  return received;
}

}  // namespace

ConnectionStream::ConnectionStream(int socket, ConnectionTimeouts timeouts)
    : socket_(socket), timeouts_(timeouts) {}

bool ConnectionStream::WaitForRequest(std::chrono::milliseconds idle) {
  if (buffer_begin_ == buffer_end_ && !Await(socket_, POLLIN, idle)) return false;
  part_ = Part::kHeaders;
  deadline_ = Clock::now() + timeouts_.headers;
  timed_out_.reset();
  responded_ = false;
  return true;
}

void ConnectionStream::StartBody() {
  part_ = Part::kBody;
  deadline_ = Clock::now() + timeouts_.body;
}

bool ConnectionStream::WaitToRead() {
  // Past the deadline even bytes already here are refused: a client that
  // sends headers without end, however fast, is cut off too.
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline_ - Clock::now());
  if (left.count() > 0 && Await(socket_, POLLIN, std::min(left, timeouts_.io))) return true;
  if (Clock::now() >= deadline_) timed_out_ = part_;
  return false;
}

bool ConnectionStream::is_readable() const {
  if (buffer_begin_ < buffer_end_) return true;
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline_ - Clock::now());
  return Await(socket_, POLLIN, std::min(left, timeouts_.io));
}

ssize_t ConnectionStream::read(char* data, size_t size) {
  if (buffer_begin_ == buffer_end_) {
    if (timed_out_ || !WaitToRead()) return -1;
    // Large reads (a body) go straight to the caller.
    if (size >= buffer_.size()) return Receive(socket_, data, size);
    const ssize_t received = Receive(socket_, buffer_.data(), buffer_.size());
    if (received <= 0) return received;
    buffer_begin_ = 0;
    buffer_end_ = static_cast<size_t>(received);
  }
  const size_t count = std::min(size, buffer_end_ - buffer_begin_);
  std::memcpy(data, buffer_.data() + buffer_begin_, count);
  buffer_begin_ += count;
  return static_cast<ssize_t>(count);
}

bool ConnectionStream::is_writable() const {
  return Await(socket_, POLLOUT, timeouts_.io) && PeerOpen(socket_);
}

ssize_t ConnectionStream::write(const char* data, size_t size) {
  if (!is_writable()) return -1;
  ssize_t sent;
  do {
    sent = send(socket_, data, size, MSG_NOSIGNAL);
  } while (sent < 0 && errno == EINTR);
  if (sent > 0) responded_ = true;
  return sent;
}

void ConnectionStream::get_remote_ip_and_port(std::string& ip, int& port) const {
  sockaddr_storage address{};
  socklen_t length = sizeof(address);
  if (getpeername(socket_, reinterpret_cast<sockaddr*>(&address), &length) == 0) {
    AddressAndPort(address, length, ip, port);
  }
}

void ConnectionStream::get_local_ip_and_port(std::string& ip, int& port) const {
  sockaddr_storage address{};
  socklen_t length = sizeof(address);
  if (getsockname(socket_, reinterpret_cast<sockaddr*>(&address), &length) == 0) {
    AddressAndPort(address, length, ip, port);
  }
}

}  // namespace kvjit::serve
