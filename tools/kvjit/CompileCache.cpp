#include "tools/kvjit/CompileCache.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <string>
#include <system_error>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace kvjit::cli {
namespace {

constexpr uint64_t kDefaultLimitMib = 8192;

struct Entry {
  std::vector<std::filesystem::path> files;
  uint64_t bytes = 0;
  std::filesystem::file_time_type last_used = std::filesystem::file_time_type::min();
  bool has_executable = false;
};

}  // namespace

absl::StatusOr<uint64_t> CompileCacheLimitBytes() {
  const char* text = std::getenv("KVJIT_COMPILE_CACHE_MIB");
  if (text == nullptr || *text == '\0') return kDefaultLimitMib << 20;
  uint64_t mib = 0;
  if (!absl::SimpleAtoi(text, &mib) || mib > (uint64_t{1} << 43)) {
    return absl::InvalidArgumentError(
        absl::StrCat("KVJIT_COMPILE_CACHE_MIB=", text, ": expected a size in MiB (0: no bound)"));
  }
  return mib << 20;
}

void MarkCompileCacheEntryUsed(const std::filesystem::path& executable) {
  std::error_code error;
  std::filesystem::last_write_time(executable, std::filesystem::file_time_type::clock::now(), error);
}

absl::StatusOr<CompileCacheTrim> TrimCompileCache(const std::filesystem::path& directory, uint64_t limit_bytes,
                                                  const std::filesystem::path& keep) {
  std::error_code listing;
  // A file another process removes meanwhile counts as empty and old.
  std::error_code ignored;
  std::map<std::string, Entry> entries;
  for (const auto& file : std::filesystem::directory_iterator(directory, listing)) {
    const std::string extension = file.path().extension().string();
    if ((extension != ".kvx" && extension != ".kvw") || !file.is_regular_file(ignored)) continue;
    Entry& entry = entries[file.path().stem().string()];
    entry.files.push_back(file.path());
    const uintmax_t bytes = file.file_size(ignored);
    entry.bytes += ignored ? 0 : bytes;
    const std::filesystem::file_time_type written = file.last_write_time(ignored);
    // The executable's time is the entry's; a sidecar's only where it is alone.
    if (extension == ".kvx") {
      entry.last_used = written;
      entry.has_executable = true;
    } else if (!entry.has_executable) {
      entry.last_used = std::max(entry.last_used, written);
    }
  }
  if (listing) {
    return absl::UnavailableError(
        absl::StrCat(directory.string(), ": cannot list the compile cache: ", listing.message()));
  }
  CompileCacheTrim trim;
  for (const auto& [stem, entry] : entries) trim.kept_bytes += entry.bytes;
  if (limit_bytes == 0 || trim.kept_bytes <= limit_bytes) return trim;

  const std::string kept_stem = keep.stem().string();
  std::vector<const Entry*> oldest_first;
  for (const auto& [stem, entry] : entries) {
    if (stem != kept_stem) oldest_first.push_back(&entry);
  }
  std::sort(oldest_first.begin(), oldest_first.end(),
            [](const Entry* a, const Entry* b) { return a->last_used < b->last_used; });
  for (const Entry* entry : oldest_first) {
    if (trim.kept_bytes <= limit_bytes) break;
    for (const std::filesystem::path& file : entry->files) std::filesystem::remove(file, ignored);
    ++trim.removed_entries;
    trim.removed_bytes += entry->bytes;
    trim.kept_bytes -= entry->bytes;
  }
  return trim;
}

}  // namespace kvjit::cli
