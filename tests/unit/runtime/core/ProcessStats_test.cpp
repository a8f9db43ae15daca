#include "runtime/core/ProcessStats.h"

#include <cstring>
#include <memory>

#include "gtest/gtest.h"
#include "runtime/core/PageBuffer.h"

namespace kvjit {
namespace {

TEST(ProcessStatsTest, ResidentMemoryGrowsWithPagesWritten) {
  const ProcessMemory before = ReadProcessMemory();
  EXPECT_GT(before.resident, 0u);
  EXPECT_GE(before.peak_resident, before.resident);
  EXPECT_GT(before.code_resident, 0u);  // this test binary and libc at least
  EXPECT_LT(before.code_resident, before.resident);
  auto buffer = PageBuffer::Allocate(64 << 20, "a test buffer");
  ASSERT_TRUE(buffer.ok());
  EXPECT_LT(ReadProcessMemory().resident, before.resident + (8 << 20));  // reserved, not resident
  std::memset(buffer->data(), 1, 32 << 20);
  const ProcessMemory after = ReadProcessMemory();
  EXPECT_GE(after.resident, before.resident + (30 << 20));
  EXPECT_GE(after.peak_resident, after.resident);
}

TEST(ProcessStatsTest, HeapInUseCountsAllocations) {
  const uint64_t before = ReadProcessMemory().heap_in_use;
  auto block = std::make_unique<char[]>(4 << 20);
  std::memset(block.get(), 1, 4 << 20);
  EXPECT_GE(ReadProcessMemory().heap_in_use, before + (4 << 20));
}

TEST(ProcessStatsTest, AMappingCountsOnlyThePagesThisProcessTouched) {
  auto buffer = PageBuffer::Allocate(16 << 20, "a test buffer");
  ASSERT_TRUE(buffer.ok());
  EXPECT_EQ(MappedResidentBytes(buffer->data(), buffer->size()), 0u);
  std::memset(buffer->data(), 1, 3 << 20);
  const uint64_t resident = MappedResidentBytes(buffer->data(), buffer->size());
  EXPECT_GE(resident, 3u << 20);
  EXPECT_LE(resident, 5u << 20);  // a huge page's rounding at most
}

TEST(ProcessStatsTest, TheProcessStartedMomentsAgo) {
  const double seconds = SecondsSinceProcessStart();
  EXPECT_GE(seconds, 0.0);
  EXPECT_LT(seconds, 600.0);
}

}  // namespace
}  // namespace kvjit
