#include "tools/serve/ConnectionsPerAddress.h"

#include <utility>

namespace kvjit::serve {

ConnectionsPerAddress::Place::Place(ConnectionsPerAddress* owner, std::string address)
    : owner_(owner), address_(std::move(address)) {}

ConnectionsPerAddress::Place::Place(Place&& other) noexcept
    : owner_(std::exchange(other.owner_, nullptr)), address_(std::move(other.address_)) {}

ConnectionsPerAddress::Place::~Place() {
  if (owner_ != nullptr) owner_->Release(address_);
}

std::optional<ConnectionsPerAddress::Place> ConnectionsPerAddress::Admit(
    const std::string& address) {
  std::lock_guard<std::mutex> lock(mutex_);
  int& open = open_[address];
  if (limit_ > 0 && open >= limit_) return std::nullopt;
  ++open;
  return Place(this, address);
}

void ConnectionsPerAddress::Release(const std::string& address) {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = open_.find(address);
  if (--it->second == 0) open_.erase(it);
}

}  // namespace kvjit::serve
