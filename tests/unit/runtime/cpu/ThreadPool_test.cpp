#include "runtime/cpu/ThreadPool.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace kvjit::cpu {
namespace {

using Chunks = std::vector<std::pair<int64_t, int64_t>>;

Chunks RecordChunks(ThreadPool& pool, int64_t n, int64_t min_chunk) {
  std::mutex mutex;
  Chunks chunks;
  pool.ParallelFor(n, min_chunk, [&](int64_t begin, int64_t end) {
    std::lock_guard<std::mutex> lock(mutex);
    chunks.emplace_back(begin, end);
  });
  std::sort(chunks.begin(), chunks.end());
  return chunks;
}

TEST(ThreadPoolTest, ChunksTileTheRangeContiguouslyAtMostOnePerThread) {
  for (int threads : {1, 2, 3, 8}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.num_threads(), threads);
    for (int64_t n : {0, 1, 2, 3, 7, 100, 1001}) {
      const Chunks chunks = RecordChunks(pool, n, 1);
      SCOPED_TRACE(::testing::Message() << threads << " threads, n = " << n);
      EXPECT_LE(static_cast<int64_t>(chunks.size()), threads);
      int64_t next = 0;
      for (const auto& [begin, end] : chunks) {
        EXPECT_EQ(begin, next);
        EXPECT_LT(begin, end);
        next = end;
      }
      EXPECT_EQ(next, n);
    }
  }
}

TEST(ThreadPoolTest, PartitionDependsOnlyOnSizesNotOnTiming) {
  ThreadPool pool(3);
  const Chunks first = RecordChunks(pool, 1000, 1);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(RecordChunks(pool, 1000, 1), first);
  EXPECT_EQ(first, (Chunks{{0, 333}, {333, 666}, {666, 1000}}));
}

TEST(ThreadPoolTest, MinimumChunkLimitsTheSplit) {
  ThreadPool pool(4);
  EXPECT_EQ(RecordChunks(pool, 100, 40), (Chunks{{0, 33}, {33, 66}, {66, 100}}));
  EXPECT_EQ(RecordChunks(pool, 100, 1000), (Chunks{{0, 100}}));
}

TEST(ThreadPoolTest, UsesSeveralThreads) {
  ThreadPool pool(2);
  std::mutex mutex;
  std::vector<std::thread::id> ids;
  std::atomic<int> arrived{0};
  pool.ParallelFor(2, [&](int64_t, int64_t) {
    // Each chunk waits for the other, which only another thread can run.
    arrived.fetch_add(1);
    while (arrived.load() < 2) std::this_thread::yield();
    std::lock_guard<std::mutex> lock(mutex);
    ids.push_back(std::this_thread::get_id());
  });
  ASSERT_EQ(ids.size(), 2u);
  EXPECT_NE(ids[0], ids[1]);
}

// Workers that have stopped spinning and gone to sleep must be woken by the
// next call: each chunk here can finish only once another thread runs the
// other chunk, so a worker left asleep would hang the test.
TEST(ThreadPoolTest, SleepingWorkersWakeForTheNextCall) {
  ThreadPool pool(2);
  for (int call = 0; call < 5; ++call) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    std::atomic<int> arrived{0};
    pool.ParallelFor(2, [&](int64_t, int64_t) {
      arrived.fetch_add(1);
      while (arrived.load() < 2) std::this_thread::yield();
    });
    EXPECT_EQ(arrived.load(), 2);
  }
}

TEST(ThreadPoolTest, NestedCallsRunInline) {
  ThreadPool pool(3);
  std::vector<std::atomic<int>> hits(12 * 10);
  pool.ParallelFor(12, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      pool.ParallelFor(10, [&](int64_t inner_begin, int64_t inner_end) {
        for (int64_t j = inner_begin; j < inner_end; ++j) hits[i * 10 + j].fetch_add(1);
      });
    }
  });
  for (const auto& hit : hits) EXPECT_EQ(hit.load(), 1);
}

TEST(ThreadPoolTest, ManyShortCallsAndCallersFromSeveralThreads) {
  ThreadPool pool(3);
  std::atomic<int64_t> total{0};
  const auto hammer = [&] {
    for (int call = 0; call < 2000; ++call) {
      pool.ParallelFor(5, [&](int64_t begin, int64_t end) { total.fetch_add(end - begin); });
    }
  };
  std::thread other(hammer);
  hammer();
  other.join();
  EXPECT_EQ(total.load(), 2 * 2000 * 5);
}

TEST(ThreadPoolTest, DefaultSizeIsTheHardwareConcurrency) {
  ThreadPool pool;
  EXPECT_EQ(pool.num_threads(), static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
}

}  // namespace
}  // namespace kvjit::cpu
