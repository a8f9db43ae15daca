#include "tools/serve/OpenFileLimit.h"

#include <sys/resource.h>

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace kvjit::serve {
namespace {

// Descriptors the process needs besides its connections: the listening
// socket, standard streams, model files, /proc reads.
constexpr rlim_t kOtherFiles = 64;

}  // namespace

ConnectionRoom MakeRoomForConnections(int connections) {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return {connections, ""};
  const rlim_t needed = static_cast<rlim_t>(connections) + kOtherFiles;
  if (limit.rlim_cur != RLIM_INFINITY && limit.rlim_cur < needed) {
    const rlim_t before = limit.rlim_cur;
    rlimit raised = limit;
    raised.rlim_cur = limit.rlim_max == RLIM_INFINITY ? needed : std::min(needed, limit.rlim_max);
    if (setrlimit(RLIMIT_NOFILE, &raised) == 0) limit = raised;
    if (limit.rlim_cur >= needed) {
      return {connections, absl::StrCat("raised the open-file limit from ", before, " to ",
                                        limit.rlim_cur, " for ", connections, " connections")};
    }
  }
  if (limit.rlim_cur == RLIM_INFINITY || limit.rlim_cur >= needed) return {connections, ""};
  const int room =
      static_cast<int>(limit.rlim_cur > kOtherFiles ? limit.rlim_cur - kOtherFiles : 1);
  return {room, absl::StrCat("the open-file limit (", limit.rlim_cur, ", hard ",
                             limit.rlim_max == RLIM_INFINITY ? std::string("unlimited")
                                                             : absl::StrCat(limit.rlim_max),
                             ") leaves room for ", room, " connections of the ", connections,
                             " asked for; raise it (ulimit -n) to serve more")};
}

}  // namespace kvjit::serve
