#include "runtime/dist/Communicator.h"

#include <cstring>

#include "runtime/core/StatusMacros.h"

namespace kvjit::runtime::dist {

absl::Status BroadcastBytes(Communicator& communicator, std::vector<uint8_t>& bytes, int root,
                            bool wait_forever) {
  uint64_t size = bytes.size();
  uint8_t size_bytes[sizeof(size)];
  std::memcpy(size_bytes, &size, sizeof(size));
  KVJIT_RETURN_IF_ERROR(communicator.Broadcast(absl::MakeSpan(size_bytes), root, wait_forever));
  std::memcpy(&size, size_bytes, sizeof(size));
  bytes.resize(size);
  if (size == 0) return absl::OkStatus();
  return communicator.Broadcast(absl::MakeSpan(bytes), root);
}

}  // namespace kvjit::runtime::dist
