#include "runtime/core/AtomicFile.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <random>

#include "absl/strings/str_cat.h"

namespace kvjit {

absl::Status WriteFileAtomically(const std::string& path, absl::Span<const uint8_t> bytes) {
  std::random_device random;
  const std::string temporary = absl::StrCat(path, ".tmp.", getpid(), ".", random());
  auto failure = [&](const char* what) {
    const int error = errno;
    unlink(temporary.c_str());
    return absl::ErrnoToStatus(error, absl::StrCat(path, ": ", what));
  };
  const int fd = open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return failure("cannot create a temporary file beside it");
  const uint8_t* data = bytes.data();
  size_t left = bytes.size();
  while (left > 0) {
    const ssize_t written = write(fd, data, left);
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0) {
      close(fd);
      return failure("cannot write");
    }
    data += written;
    left -= static_cast<size_t>(written);
  }
  if (fsync(fd) != 0) {
    close(fd);
    return failure("cannot flush");
  }
  if (close(fd) != 0) return failure("cannot close");
  if (rename(temporary.c_str(), path.c_str()) != 0) return failure("cannot rename into place");
  return absl::OkStatus();
}

}  // namespace kvjit
