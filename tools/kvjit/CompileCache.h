#ifndef KVJIT_TOOLS_KVJIT_COMPILECACHE_H_
#define KVJIT_TOOLS_KVJIT_COMPILECACHE_H_

#include <cstdint>
#include <filesystem>

#include "absl/status/statusor.h"

namespace kvjit::cli {

// The bound on the compile cache of `kvjit run|bench|serve MODEL`
// (CompileOnTheFly.h): $KVJIT_COMPILE_CACHE_MIB, in MiB, or 8 GiB; 0 means
// no bound. Every rebuilt kvjit and every option compiles a model anew into
// an entry of its own, so that without a bound the cache grows without end
// (a day of benchmarks once filled a disk with 48 GB of it).
absl::StatusOr<uint64_t> CompileCacheLimitBytes();

// Records that the entry of `executable` (a .kvx) was used now: the
// least recently used entries are the first to go.
void MarkCompileCacheEntryUsed(const std::filesystem::path& executable);

struct CompileCacheTrim {
  int removed_entries = 0;
  uint64_t removed_bytes = 0;
  uint64_t kept_bytes = 0;
};

// Removes the least recently used entries of `directory` until its entries
// take at most `limit_bytes` (0: none removed). An entry is a compiled
// executable, NAME.kvx, with its weight sidecar NAME.kvw where it has one
// (either alone counts too), last used when its .kvx (else its .kvw) was
// last written or marked; other files are not entries and stay. The entry
// of `keep` (the executable about to run) stays whatever its size.
absl::StatusOr<CompileCacheTrim> TrimCompileCache(const std::filesystem::path& directory, uint64_t limit_bytes,
                                                  const std::filesystem::path& keep);

}  // namespace kvjit::cli

#endif  // KVJIT_TOOLS_KVJIT_COMPILECACHE_H_
