#include "runtime/core/ProcessStats.h"

#include <malloc.h>
#include <time.h>
#include <unistd.h>

#include <cctype>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>

namespace kvjit {
namespace {

// A "Name:   1234 kB" line of /proc/self/status, in bytes.
uint64_t StatusKilobytes(const std::string& status, const std::string& name) {
  const size_t at = status.find(name + ":");
  if (at == std::string::npos) return 0;
  return std::stoull(status.substr(at + name.size() + 1)) * 1024;
}

std::string ExecutablePath() {
  char self[4096];
  const ssize_t length = readlink("/proc/self/exe", self, sizeof(self) - 1);
  return length > 0 ? std::string(self, static_cast<size_t>(length)) : "";
}

bool IsCodeMapping(const std::string& path, const std::string& executable) {
  if (path.empty() || path[0] != '/') return false;
  return path == executable || path.find(".so") != std::string::npos;
}

// Calls `visit(start, end, path, rss_bytes)` for every mapping of /proc/self/smaps.
template <typename Visit>
void ForEachMapping(Visit visit) {
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  uintptr_t start = 0, end = 0;
  std::string path;
  while (std::getline(smaps, line)) {
    // A mapping's header: "start-end perms offset dev inode [path]".
    const size_t dash = line.find('-');
    if (!line.empty() && std::isxdigit(static_cast<unsigned char>(line[0])) &&
        dash < line.find(' ')) {
      std::istringstream fields(line);
      std::string range, perms, offset, device, inode;
      path.clear();
      fields >> range >> perms >> offset >> device >> inode >> path;
      start = std::stoull(range.substr(0, dash), nullptr, 16);
      end = std::stoull(range.substr(dash + 1), nullptr, 16);
    } else if (line.rfind("Rss:", 0) == 0) {
      visit(start, end, path, std::stoull(line.substr(4)) * 1024);
    }
  }
}

}  // namespace

uint64_t MappedResidentBytes(const void* address, size_t bytes) {
  const uintptr_t begin = reinterpret_cast<uintptr_t>(address);
  uint64_t resident = 0;
  ForEachMapping([&](uintptr_t start, uintptr_t, const std::string&, uint64_t rss) {
    // A mapping of the range ends on a page boundary, maybe past its last byte.
    if (start >= begin && start < begin + bytes) resident += rss;
  });
  return resident;
}

ProcessMemory ReadProcessMemory() {
  ProcessMemory memory;
  std::ifstream status_file("/proc/self/status");
  std::stringstream status;
  status << status_file.rdbuf();
  memory.peak_resident = StatusKilobytes(status.str(), "VmHWM");
  memory.resident = StatusKilobytes(status.str(), "VmRSS");

  const std::string executable = ExecutablePath();
  ForEachMapping([&](uintptr_t, uintptr_t, const std::string& path, uint64_t rss) {
    if (IsCodeMapping(path, executable)) memory.code_resident += rss;
  });
  memory.heap_in_use = HeapInUse();
  return memory;
}

uint64_t HeapInUse() {
  const struct mallinfo2 heap = mallinfo2();
  return heap.uordblks + heap.hblkhd;
}

double SecondsSinceProcessStart() {
  std::ifstream stat_file("/proc/self/stat");
  std::string stat((std::istreambuf_iterator<char>(stat_file)), std::istreambuf_iterator<char>());
  // Field 22, starttime, counted after the command name, which may hold spaces.
  const size_t name_end = stat.rfind(')');
  if (name_end == std::string::npos) return 0;
  std::istringstream fields(stat.substr(name_end + 2));
  std::string skipped;
  for (int field = 3; field < 22; ++field) fields >> skipped;
  unsigned long long start_ticks = 0;
  if (!(fields >> start_ticks)) return 0;
  struct timespec now;
  clock_gettime(CLOCK_BOOTTIME, &now);
  const double ticks_per_second = static_cast<double>(sysconf(_SC_CLK_TCK));
  return now.tv_sec + now.tv_nsec * 1e-9 - start_ticks / ticks_per_second;
}

}  // namespace kvjit
