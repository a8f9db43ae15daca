#include "runtime/core/PageBuffer.h"

#include <unistd.h>

#include <cstring>

#include "gtest/gtest.h"

namespace kvjit {
namespace {

TEST(PageBufferTest, OnlyWrittenPagesAreResident) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  auto buffer = PageBuffer::Allocate(1024 * page, "a test buffer");
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  EXPECT_EQ(buffer->ResidentBytes(), 0u);
  std::memset(buffer->data() + 10 * page, 7, 3 * page);
  EXPECT_EQ(buffer->ResidentBytes(), 3 * page);
  EXPECT_EQ(buffer->data()[1000 * page + 5], 0);  // zero-filled
  buffer->data()[1000 * page + 5] = 1;
  EXPECT_EQ(buffer->ResidentBytes(), 4 * page);
}

TEST(PageBufferTest, MovingKeepsTheAddress) {
  auto buffer = PageBuffer::Allocate(8192, "a test buffer");
  ASSERT_TRUE(buffer.ok());
  uint8_t* address = buffer->data();
  PageBuffer moved = std::move(*buffer);
  EXPECT_EQ(moved.data(), address);
  EXPECT_EQ(moved.size(), 8192u);
  EXPECT_EQ(buffer->data(), nullptr);
}

TEST(PageBufferTest, AnImpossibleSizeIsAnErrorNamingTheBuffer) {
  auto buffer = PageBuffer::Allocate(size_t{1} << 62, "the KV pool");
  ASSERT_FALSE(buffer.ok());
  EXPECT_EQ(buffer.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(buffer.status().message().find("the KV pool"), std::string::npos) << buffer.status();
}

TEST(PageBufferTest, AnEmptyBufferHasNoBytes) {
  auto buffer = PageBuffer::Allocate(0, "nothing");
  ASSERT_TRUE(buffer.ok());
  EXPECT_EQ(buffer->size(), 0u);
  EXPECT_EQ(buffer->ResidentBytes(), 0u);
}

}  // namespace
}  // namespace kvjit
