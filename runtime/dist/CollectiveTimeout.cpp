#include "runtime/dist/CollectiveTimeout.h"

#include <cmath>
#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace kvjit::runtime::dist {

absl::StatusOr<absl::Duration> CollectiveTimeoutFromEnvironment() {
  const char* text = std::getenv("KVJIT_COLLECTIVE_TIMEOUT_S");
  if (text == nullptr) return kDefaultCollectiveTimeout;
  double seconds = 0;
  if (!absl::SimpleAtod(text, &seconds) || !std::isfinite(seconds) || seconds <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "KVJIT_COLLECTIVE_TIMEOUT_S is '", text,
        "': it must be a positive number of seconds (how long a rank waits for the others at a "
        "collective)"));
  }
  return absl::Seconds(seconds);
}

}  // namespace kvjit::runtime::dist
