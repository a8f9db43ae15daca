// The on-disk NVRTC cache: keys cover everything that shapes NVRTC's
// output, entries survive a round trip, broken entries miss, and concurrent
// writers leave one whole entry.

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "codegen/cuda/NvrtcCache.h"
#include "codegen/cuda/NvrtcCompiler.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvjit::codegen::cuda {
namespace {

class NvrtcCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    directory_ = std::filesystem::temp_directory_path() /
                 absl::StrCat("kvjit-nvrtc-cache-test-", getpid(), "-",
                              ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(directory_);
  }
  void TearDown() override { std::filesystem::remove_all(directory_); }

  static CudaBinary Binary(const std::string& text) {
    CudaBinary binary;
    binary.cubin.assign(text.begin(), text.end());
    binary.ptx = absl::StrCat(".ptx for ", text);
    return binary;
  }

  std::filesystem::path directory_;
};

TEST_F(NvrtcCacheTest, KeysCoverSourceArchitectureOptionsAndVersion) {
  const std::vector<std::string> options = {"-default-device"};
  const std::string key = NvrtcCache::Key("source", 90, options, 13000);
  EXPECT_EQ(key.size(), 64u);
  EXPECT_EQ(key, NvrtcCache::Key("source", 90, options, 13000));
  EXPECT_NE(key, NvrtcCache::Key("source ", 90, options, 13000));
  EXPECT_NE(key, NvrtcCache::Key("source", 80, options, 13000));
  EXPECT_NE(key, NvrtcCache::Key("source", 90, {"-default-device", "--use_fast_math"}, 13000));
  EXPECT_NE(key, NvrtcCache::Key("source", 90, options, 13010));
  // Parts are length-prefixed: moving text between them changes the key.
  EXPECT_NE(NvrtcCache::Key("ab", 90, {"c"}, 1), NvrtcCache::Key("a", 90, {"bc"}, 1));
}

TEST_F(NvrtcCacheTest, StoresAndFindsEntries) {
  const NvrtcCache cache(directory_.string());
  const std::string key = NvrtcCache::Key("source", 90, {}, 13000);
  EXPECT_FALSE(cache.Lookup(key).has_value());
  ASSERT_TRUE(cache.Store(key, Binary("cubin bytes")).ok());
  std::optional<CudaBinary> found = cache.Lookup(key);
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(std::string(found->cubin.begin(), found->cubin.end()), "cubin bytes");
  EXPECT_EQ(found->ptx, ".ptx for cubin bytes");
  EXPECT_FALSE(cache.Lookup(NvrtcCache::Key("source", 80, {}, 13000)).has_value());
}

TEST_F(NvrtcCacheTest, ABrokenEntryIsAMiss) {
  const NvrtcCache cache(directory_.string());
  const std::string key = NvrtcCache::Key("source", 90, {}, 13000);
  ASSERT_TRUE(cache.Store(key, Binary("cubin bytes")).ok());
  const std::string path = cache.PathFor(key);
  std::filesystem::resize_file(path, std::filesystem::file_size(path) - 3);
  EXPECT_FALSE(cache.Lookup(key).has_value());
  std::ofstream(path, std::ios::binary | std::ios::trunc) << "not an entry at all";
  EXPECT_FALSE(cache.Lookup(key).has_value());
}

TEST_F(NvrtcCacheTest, ConcurrentWritersLeaveOneWholeEntry) {
  const NvrtcCache cache(directory_.string());
  const std::string key = NvrtcCache::Key("source", 90, {}, 13000);
  const CudaBinary binary = Binary(std::string(1 << 20, 'x'));
  std::vector<std::thread> writers;
  for (int i = 0; i < 8; ++i) {
    writers.emplace_back([&] { EXPECT_TRUE(cache.Store(key, binary).ok()); });
  }
  for (std::thread& writer : writers) writer.join();
  std::optional<CudaBinary> found = cache.Lookup(key);
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->cubin, binary.cubin);
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(directory_)) {
    ++files;
    EXPECT_EQ(entry.path().extension(), ".nvrtc") << entry.path();
  }
  EXPECT_EQ(files, 1);  // no temporary file is left behind
}

TEST_F(NvrtcCacheTest, TheEnvironmentChoosesTheDirectory) {
  const char* saved = std::getenv("KVJIT_NVRTC_CACHE_DIR");
  const std::string restore = saved ? saved : "";
  setenv("KVJIT_NVRTC_CACHE_DIR", "/somewhere/nvrtc", 1);
  EXPECT_EQ(NvrtcCache::DefaultDirectory(), "/somewhere/nvrtc");
  unsetenv("KVJIT_NVRTC_CACHE_DIR");
  EXPECT_THAT(NvrtcCache::DefaultDirectory(), ::testing::EndsWith("kvjit/nvrtc"));
  if (saved) setenv("KVJIT_NVRTC_CACHE_DIR", restore.c_str(), 1);
}

TEST_F(NvrtcCacheTest, TheCompilerMissesThenHits) {
  const NvrtcCache cache(directory_.string());
  const std::string source = "extern \"C\" __global__ void kvjit_cached(float* x) { x[0] = 1.0f; }";
  absl::StatusOr<NvrtcResult> first = CompileWithNvrtc(source, "cached", NvrtcOptions{}, &cache);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_FALSE(first->cache_hit);
  absl::StatusOr<NvrtcResult> second = CompileWithNvrtc(source, "cached", NvrtcOptions{}, &cache);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_TRUE(second->cache_hit);
  EXPECT_EQ(second->binary.cubin, first->binary.cubin);
  EXPECT_EQ(second->binary.ptx, first->binary.ptx);
  EXPECT_EQ(second->binary.options, first->binary.options);
  NvrtcOptions other_arch;
  other_arch.arch = 80;
  absl::StatusOr<NvrtcResult> third = CompileWithNvrtc(source, "cached", other_arch, &cache);
  ASSERT_TRUE(third.ok()) << third.status();
  EXPECT_FALSE(third->cache_hit);
}

}  // namespace
}  // namespace kvjit::codegen::cuda
