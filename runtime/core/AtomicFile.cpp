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
  // The caller saves errno right after the call that failed: close and
  // unlink may change it.
  auto failure = [&](int error, const char* what) {
    unlink(temporary.c_str());
    return absl::ErrnoToStatus(error, absl::StrCat(path, ": ", what));
  };
  const int fd = open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return failure(errno, "cannot create a temporary file beside it");
  const uint8_t* data = bytes.data();
  size_t left = bytes.size();
  while (left > 0) {
    const ssize_t written = write(fd, data, left);
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0) {
      // write() returning 0 for a non-empty buffer sets no errno.
      const int error = written < 0 ? errno : EIO;
      close(fd);
      return failure(error, "cannot write");
    }
    data += written;
    left -= static_cast<size_t>(written);
  }
  if (fsync(fd) != 0) {
    const int error = errno;
    close(fd);
    return failure(error, "cannot flush");
  }
  if (close(fd) != 0) return failure(errno, "cannot close");
  if (rename(temporary.c_str(), path.c_str()) != 0) return failure(errno, "cannot rename into place");
  return absl::OkStatus();
}

}  // namespace kvjit
