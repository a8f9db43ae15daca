#include "runtime/generation/BackgroundWorker.h"

#include <thread>

#include "gtest/gtest.h"

namespace kvjit::runtime {
namespace {

TEST(BackgroundWorkerTest, RunsEachTaskOnItsOwnThreadAndWaitReturnsWhenItIsDone) {
  BackgroundWorker worker;
  int sum = 0;
  std::thread::id where;
  for (int i = 1; i <= 1000; ++i) {
    worker.Start([&sum, &where, i] {
      sum += i;
      where = std::this_thread::get_id();
    });
    worker.Wait();
    ASSERT_EQ(sum, i * (i + 1) / 2);
  }
  EXPECT_NE(where, std::this_thread::get_id());
  // Waiting with nothing started returns at once.
  worker.Wait();
}

TEST(BackgroundWorkerTest, StopsWhenDestroyedIdle) {
  for (int i = 0; i < 100; ++i) BackgroundWorker worker;
}

}  // namespace
}  // namespace kvjit::runtime
