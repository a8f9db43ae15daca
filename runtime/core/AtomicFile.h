#ifndef KVJIT_RUNTIME_CORE_ATOMICFILE_H_
#define KVJIT_RUNTIME_CORE_ATOMICFILE_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/types/span.h"

namespace kvjit {

// Writes `bytes` to `path` so that readers see either the old file or the
// whole new one, never part of it: into a temporary file beside it, unique to
// this writer, flushed to disk (else a crash after the rename could leave an
// empty file under the final name), then renamed over `path`. Concurrent
// writers of the same path each succeed; the last rename wins. Errors carry
// errno's code and name the path.
absl::Status WriteFileAtomically(const std::string& path, absl::Span<const uint8_t> bytes);

}  // namespace kvjit

#endif  // KVJIT_RUNTIME_CORE_ATOMICFILE_H_
