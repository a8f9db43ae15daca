#include "tools/serve/PeerConnection.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstdlib>

namespace kvjit::serve {
namespace {

// Whether `address` is `host`:`port`, the host written as cpp-httplib
// writes it (getnameinfo with NI_NUMERICHOST).
bool IsAddress(const sockaddr_storage& address, socklen_t length, const std::string& host,
               int port) {
  char text[NI_MAXHOST];
  char service[NI_MAXSERV];
  if (getnameinfo(reinterpret_cast<const sockaddr*>(&address), length, text, sizeof(text),
                  service, sizeof(service), NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
    return false;
  }
  return host == text && port == std::atoi(service);
}

}  // namespace

PeerConnection PeerConnection::Find(const std::string& local_addr, int local_port,
                                     const std::string& remote_addr, int remote_port) {
  DIR* descriptors = opendir("/proc/self/fd");
  if (descriptors == nullptr) return PeerConnection(-1);
  int found = -1;
  while (dirent* entry = readdir(descriptors)) {
    char* end = nullptr;
    const long descriptor = std::strtol(entry->d_name, &end, 10);
    if (end == entry->d_name || *end != '\0') continue;
    sockaddr_storage peer{};
    socklen_t peer_length = sizeof(peer);
    if (getpeername(static_cast<int>(descriptor), reinterpret_cast<sockaddr*>(&peer),
                    &peer_length) != 0 ||
        !IsAddress(peer, peer_length, remote_addr, remote_port)) {
      continue;
    }
    sockaddr_storage local{};
    socklen_t local_length = sizeof(local);
    if (getsockname(static_cast<int>(descriptor), reinterpret_cast<sockaddr*>(&local),
                    &local_length) == 0 &&
        IsAddress(local, local_length, local_addr, local_port)) {
      found = static_cast<int>(descriptor);
      break;
    }
  }
  closedir(descriptors);
  return PeerConnection(found);
}

bool PeerConnection::Closed() const {
  if (socket_ < 0) return false;
  pollfd poll_entry{socket_, POLLIN | POLLRDHUP, 0};
  if (poll(&poll_entry, 1, 0) <= 0) return false;
  if (poll_entry.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) return true;
  // Readable: the next request of a pipelining client, or the end of stream.
  char byte;
  const ssize_t read = recv(socket_, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  return read == 0 || (read < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

}  // namespace kvjit::serve
