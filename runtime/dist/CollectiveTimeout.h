#ifndef KVJIT_RUNTIME_DIST_COLLECTIVETIMEOUT_H_
#define KVJIT_RUNTIME_DIST_COLLECTIVETIMEOUT_H_

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace kvjit::runtime::dist {

// How long a rank waits at a collective for the others before it gives up
// with DeadlineExceeded: long enough for the slowest rank's share of a
// prefill step, short enough that a rank that died or hung ends the run
// instead of hanging it.
inline constexpr absl::Duration kDefaultCollectiveTimeout = absl::Seconds(60);

// The collective timeout: the environment variable KVJIT_COLLECTIVE_TIMEOUT_S
// (seconds, a positive number, fractions allowed) where it is set, else
// kDefaultCollectiveTimeout. A value that is not a positive number is an
// error naming the variable and the value.
absl::StatusOr<absl::Duration> CollectiveTimeoutFromEnvironment();

}  // namespace kvjit::runtime::dist

#endif  // KVJIT_RUNTIME_DIST_COLLECTIVETIMEOUT_H_
