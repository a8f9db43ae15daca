#include "runtime/cpu/ThreadPool.h"

#include <algorithm>

namespace kvjit::cpu {
namespace {

// Set while a thread runs a ParallelFor body, so nested calls run inline
// instead of waiting on workers that are busy with the outer call.
thread_local bool inside_parallel_body = false;

// About 50 to 100 microseconds of polling before a worker blocks: longer than
// the gap between the kernels of one step, short enough not to starve other
// processes when the runtime goes idle.
constexpr int kSpinIterations = 1 << 12;

void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#else
  std::this_thread::yield();
#endif
}

class ParallelBodyScope {
 public:
  ParallelBodyScope() : previous_(inside_parallel_body) { inside_parallel_body = true; }
  ~ParallelBodyScope() { inside_parallel_body = previous_; }

 private:
  bool previous_;
};

int ResolveThreadCount(int requested) {
  if (requested > 0) return requested;
  return std::max(1u, std::thread::hardware_concurrency());
}

}  // namespace

ThreadPool::ThreadPool(int num_threads) : num_threads_(ResolveThreadCount(num_threads)) {
  workers_.reserve(num_threads_ - 1);
  for (int i = 1; i < num_threads_; ++i) workers_.emplace_back([this] { WorkerLoop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(job_mutex_);
    stopping_ = true;
    ++generation_;
    posted_generation_.store(generation_, std::memory_order_release);
  }
  job_posted_.notify_all();
  for (std::thread& worker : workers_) worker.join();
}

void ThreadPool::ParallelFor(int64_t n, const RangeFunction& body) { ParallelFor(n, 1, body); }

void ThreadPool::ParallelFor(int64_t n, int64_t min_chunk, const RangeFunction& body) {
  if (n <= 0) return;
  min_chunk = std::max<int64_t>(min_chunk, 1);
  const int64_t chunks = std::min<int64_t>(num_threads_, (n + min_chunk - 1) / min_chunk);
  if (chunks <= 1 || inside_parallel_body) {
    ParallelBodyScope scope;
    body(0, n);
    return;
  }

  std::lock_guard<std::mutex> call_lock(call_mutex_);
  {
    std::lock_guard<std::mutex> lock(job_mutex_);
    body_ = &body;
    n_ = n;
    num_chunks_ = chunks;
    next_chunk_ = 0;
    finished_chunks_.store(0, std::memory_order_relaxed);
    ++generation_;
    posted_generation_.store(generation_, std::memory_order_release);
  }
  job_posted_.notify_all();

  RunChunks();
  // Every chunk is claimed by now; wait for the workers still running theirs.
  for (int spins = 0; finished_chunks_.load(std::memory_order_acquire) < chunks; ++spins) {
    if (spins < kSpinIterations) {
      CpuRelax();
    } else {
      std::this_thread::yield();
    }
  }
  std::lock_guard<std::mutex> lock(job_mutex_);
  body_ = nullptr;
}

void ThreadPool::RunChunks() {
  ParallelBodyScope scope;
  for (;;) {
    const RangeFunction* body;
    int64_t begin, end;
    {
      std::lock_guard<std::mutex> lock(job_mutex_);
      if (body_ == nullptr || next_chunk_ >= num_chunks_) return;
      const int64_t chunk = next_chunk_++;
      body = body_;
      begin = chunk * n_ / num_chunks_;
      end = (chunk + 1) * n_ / num_chunks_;
    }
    (*body)(begin, end);
    finished_chunks_.fetch_add(1, std::memory_order_release);
  }
}

void ThreadPool::WaitForWork(uint64_t seen_generation) {
  for (int spins = 0; spins < kSpinIterations; ++spins) {
    if (posted_generation_.load(std::memory_order_acquire) != seen_generation) return;
    CpuRelax();
  }
  std::unique_lock<std::mutex> lock(job_mutex_);
  job_posted_.wait(lock, [&] { return generation_ != seen_generation; });
}

void ThreadPool::WorkerLoop() {
  uint64_t seen_generation = 0;
  for (;;) {
    WaitForWork(seen_generation);
    {
      std::lock_guard<std::mutex> lock(job_mutex_);
      if (stopping_) return;
      seen_generation = generation_;
    }
    RunChunks();
  }
}

}  // namespace kvjit::cpu
