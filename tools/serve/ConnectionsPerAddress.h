#ifndef KVJIT_TOOLS_SERVE_CONNECTIONSPERADDRESS_H_
#define KVJIT_TOOLS_SERVE_CONNECTIONSPERADDRESS_H_

#include <mutex>
#include <optional>
#include <string>

#include "absl/container/flat_hash_map.h"

namespace kvjit::serve {

// Counts each client address's open connections against a limit, so that
// one client (or one attacker) cannot take every connection the server has.
class ConnectionsPerAddress {
 public:
  // One admitted connection's place, given back when it is destroyed.
  class Place {
   public:
    Place(Place&& other) noexcept;
    Place& operator=(Place&&) = delete;
    ~Place();

   private:
    friend class ConnectionsPerAddress;
    Place(ConnectionsPerAddress* owner, std::string address);

    ConnectionsPerAddress* owner_;
    std::string address_;
  };

  // `limit` connections per address; 0: no limit.
  explicit ConnectionsPerAddress(int limit) : limit_(limit) {}

  // A place for one more connection from `address`, or none when it holds
  // the limit already.
  std::optional<Place> Admit(const std::string& address);

  int limit() const { return limit_; }

 private:
  void Release(const std::string& address);

  const int limit_;
  std::mutex mutex_;
  absl::flat_hash_map<std::string, int> open_;  // absent: none
};

}  // namespace kvjit::serve

#endif  // KVJIT_TOOLS_SERVE_CONNECTIONSPERADDRESS_H_
