#ifndef KVJIT_RUNTIME_CPU_THREADPOOL_H_
#define KVJIT_RUNTIME_CPU_THREADPOOL_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace kvjit::cpu {

// A fixed set of threads for the CPU kernels. The thread calling ParallelFor
// works too, so a pool of n threads starts n - 1 workers.
//
// Partitioning is deterministic: [0, n) is cut into contiguous chunks whose
// bounds depend only on n, the minimum chunk size and the pool size, and each
// index belongs to exactly one chunk. Kernels make every output element the
// work of a single index with a fixed reduction order, so their results do
// not depend on the number of threads.
//
// Idle workers spin briefly (decode steps come back-to-back, and waking a
// blocked thread costs tens of microseconds) and then block.
class ThreadPool {
 public:
  using RangeFunction = std::function<void(int64_t begin, int64_t end)>;

  // num_threads <= 0 means std::thread::hardware_concurrency() (at least 1).
  explicit ThreadPool(int num_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return num_threads_; }

  // Calls body(begin, end) over contiguous chunks covering [0, n), at most one
  // chunk per thread, and returns when all have run. Calls from inside a body
  // run inline on the calling thread; calls from several outside threads take
  // turns.
  void ParallelFor(int64_t n, const RangeFunction& body);
  // As above, with chunks of at least min_chunk indices (the last may be
  // shorter only when n itself is), for bodies too cheap to split finely.
  void ParallelFor(int64_t n, int64_t min_chunk, const RangeFunction& body);

 private:
  void WorkerLoop();
  // Claims and runs chunks of the current job until none are left.
  void RunChunks();
  void WaitForWork(uint64_t seen_generation);

  const int num_threads_;
  std::vector<std::thread> workers_;

  // Serializes ParallelFor calls made from different outside threads.
  std::mutex call_mutex_;

  // The current job; guarded by job_mutex_. Chunks are claimed under the
  // mutex (a few per call), so a worker that wakes late never sees a job
  // half-written.
  std::mutex job_mutex_;
  std::condition_variable job_posted_;
  const RangeFunction* body_ = nullptr;
  int64_t n_ = 0;
  int64_t num_chunks_ = 0;
  int64_t next_chunk_ = 0;
  bool stopping_ = false;
  uint64_t generation_ = 0;

  // Mirrors generation_ so that spinning workers need not take the mutex.
  std::atomic<uint64_t> posted_generation_{0};
  std::atomic<int64_t> finished_chunks_{0};
};

}  // namespace kvjit::cpu

#endif  // KVJIT_RUNTIME_CPU_THREADPOOL_H_
