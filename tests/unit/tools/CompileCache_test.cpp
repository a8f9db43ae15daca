#include "tools/kvjit/CompileCache.h"

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace kvjit::cli {
namespace {

namespace fs = std::filesystem;

class CompileCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    directory_ = fs::temp_directory_path() /
                 ("kvjit-compile-cache-test-" + std::to_string(::getpid()) + "-" +
                  ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(directory_);
    fs::create_directories(directory_);
  }
  void TearDown() override { fs::remove_all(directory_); }

  // A file of `bytes` bytes last written `age_s` seconds ago.
  fs::path Write(const std::string& name, size_t bytes, int age_s) {
    const fs::path path = directory_ / name;
    std::ofstream(path, std::ios::binary) << std::string(bytes, 'x');
    fs::last_write_time(path, fs::file_time_type::clock::now() - std::chrono::seconds(age_s));
    return path;
  }
  bool Exists(const std::string& name) const { return fs::exists(directory_ / name); }

  fs::path directory_;
};

TEST_F(CompileCacheTest, RemovesTheLeastRecentlyUsedEntriesUntilWithinTheLimit) {
  Write("old.kvx", 100, 300);
  Write("old.kvw", 900, 300);  // an entry is the executable with its sidecar
  Write("middle.kvx", 500, 200);
  Write("new.kvx", 400, 100);
  const fs::path kept = Write("just-compiled.kvx", 300, 0);
  // 2200 bytes in all; within 1300 once old (1000) goes; 1200 after it.
  absl::StatusOr<CompileCacheTrim> trim = TrimCompileCache(directory_, 1300, kept);
  ASSERT_TRUE(trim.ok()) << trim.status();
  EXPECT_EQ(trim->removed_entries, 1);
  EXPECT_EQ(trim->removed_bytes, 1000u);
  EXPECT_EQ(trim->kept_bytes, 1200u);
  EXPECT_FALSE(Exists("old.kvx"));
  EXPECT_FALSE(Exists("old.kvw"));
  EXPECT_TRUE(Exists("middle.kvx"));
  EXPECT_TRUE(Exists("new.kvx"));
}

TEST_F(CompileCacheTest, AnEntryExactlyAtTheLimitStaysAndOneByteMoreGoes) {
  Write("a.kvx", 600, 200);
  const fs::path kept = Write("b.kvx", 400, 0);
  ASSERT_TRUE(TrimCompileCache(directory_, 1000, kept).ok());
  EXPECT_TRUE(Exists("a.kvx"));
  absl::StatusOr<CompileCacheTrim> trim = TrimCompileCache(directory_, 999, kept);
  ASSERT_TRUE(trim.ok());
  EXPECT_EQ(trim->removed_entries, 1);
  EXPECT_FALSE(Exists("a.kvx"));
}

TEST_F(CompileCacheTest, MarkingAnEntryUsedMovesItToTheBackOfTheLine) {
  const fs::path first = Write("first.kvx", 500, 300);
  Write("second.kvx", 500, 200);
  const fs::path kept = Write("third.kvx", 500, 0);
  MarkCompileCacheEntryUsed(first);
  ASSERT_TRUE(TrimCompileCache(directory_, 1000, kept).ok());
  EXPECT_TRUE(Exists("first.kvx"));
  EXPECT_FALSE(Exists("second.kvx"));
}

TEST_F(CompileCacheTest, KeepsTheRunningEntryAndOtherFilesWhateverTheirSize) {
  const fs::path kept = Write("huge.kvx", 5000, 400);
  Write("huge.kvw", 5000, 400);
  Write("notes.txt", 5000, 500);
  Write("orphan.kvw", 10, 100);  // a sidecar whose executable is gone
  absl::StatusOr<CompileCacheTrim> trim = TrimCompileCache(directory_, 100, kept);
  ASSERT_TRUE(trim.ok());
  EXPECT_EQ(trim->removed_entries, 1);
  EXPECT_TRUE(Exists("huge.kvx"));
  EXPECT_TRUE(Exists("huge.kvw"));
  EXPECT_TRUE(Exists("notes.txt"));
  EXPECT_FALSE(Exists("orphan.kvw"));
}

TEST_F(CompileCacheTest, ALimitOfZeroRemovesNothing) {
  Write("a.kvx", 5000, 300);
  const fs::path kept = Write("b.kvx", 5000, 0);
  absl::StatusOr<CompileCacheTrim> trim = TrimCompileCache(directory_, 0, kept);
  ASSERT_TRUE(trim.ok());
  EXPECT_EQ(trim->removed_entries, 0);
  EXPECT_TRUE(Exists("a.kvx"));
}

TEST_F(CompileCacheTest, AMissingDirectoryIsAnErrorNamingIt) {
  absl::StatusOr<CompileCacheTrim> trim = TrimCompileCache(directory_ / "absent", 100, directory_ / "x.kvx");
  ASSERT_FALSE(trim.ok());
  EXPECT_NE(trim.status().message().find("absent"), std::string::npos) << trim.status();
}

TEST(CompileCacheLimit, ReadsMebibytesFromTheEnvironmentAndRefusesOtherText) {
  ::unsetenv("KVJIT_COMPILE_CACHE_MIB");
  EXPECT_EQ(*CompileCacheLimitBytes(), uint64_t{8192} << 20);
  ::setenv("KVJIT_COMPILE_CACHE_MIB", "512", 1);
  EXPECT_EQ(*CompileCacheLimitBytes(), uint64_t{512} << 20);
  ::setenv("KVJIT_COMPILE_CACHE_MIB", "0", 1);
  EXPECT_EQ(*CompileCacheLimitBytes(), 0u);
  ::setenv("KVJIT_COMPILE_CACHE_MIB", "8G", 1);
  absl::StatusOr<uint64_t> refused = CompileCacheLimitBytes();
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("KVJIT_COMPILE_CACHE_MIB=8G"), std::string::npos);
  ::unsetenv("KVJIT_COMPILE_CACHE_MIB");
}

}  // namespace
}  // namespace kvjit::cli
