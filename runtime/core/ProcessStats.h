#ifndef KVJIT_RUNTIME_CORE_PROCESSSTATS_H_
#define KVJIT_RUNTIME_CORE_PROCESSSTATS_H_

#include <cstddef>
#include <cstdint>

namespace kvjit {

// The process's memory as Linux counts it (/proc/self/status, /proc/self/smaps).
struct ProcessMemory {
  uint64_t peak_resident = 0;  // VmHWM: the most resident at once so far
  uint64_t resident = 0;       // VmRSS
  // Resident pages of mapped executables and shared libraries (their code
  // and data), kvjit's own binary included.
  uint64_t code_resident = 0;
  // Bytes malloc has handed out and not taken back (mallinfo2), the stack
  // and the allocator's free lists not included.
  uint64_t heap_in_use = 0;
};

ProcessMemory ReadProcessMemory();

// ProcessMemory::heap_in_use alone: malloc's count, without reading
// /proc/self/smaps, cheap enough for the start-up path.
uint64_t HeapInUse();

// Bytes of [address, address + bytes) that count in this process's resident
// memory (the Rss of its mappings there, /proc/self/smaps). For a mapped file
// this is what the process touched, not what the page cache happens to hold
// (which mincore would say).
uint64_t MappedResidentBytes(const void* address, size_t bytes);

// Seconds since the kernel started this process (so dynamic loading before
// main counts), to the 10 ms of the kernel's clock ticks.
double SecondsSinceProcessStart();

}  // namespace kvjit

#endif  // KVJIT_RUNTIME_CORE_PROCESSSTATS_H_
