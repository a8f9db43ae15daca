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

constexpr uint64_t kChunkMask = 0xffff;
constexpr int64_t kMaxChunks = static_cast<int64_t>(kChunkMask);

uint64_t ClaimWord(uint32_t generation, int64_t chunks, int64_t next) {
  return (static_cast<uint64_t>(generation) << 32) | (static_cast<uint64_t>(chunks) << 16) |
         static_cast<uint64_t>(next);
}
uint32_t GenerationOf(uint64_t word) { return static_cast<uint32_t>(word >> 32); }
int64_t ChunksOf(uint64_t word) { return static_cast<int64_t>((word >> 16) & kChunkMask); }
int64_t NextChunkOf(uint64_t word) { return static_cast<int64_t>(word & kChunkMask); }

}  // namespace

ThreadPool::ThreadPool(int num_threads) : num_threads_(ResolveThreadCount(num_threads)) {
  workers_.reserve(num_threads_ - 1);
  for (int i = 1; i < num_threads_; ++i) workers_.emplace_back([this] { WorkerLoop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(sleep_mutex_);
    stopping_.store(true);
  }
  job_posted_.notify_all();
  for (std::thread& worker : workers_) worker.join();
}

void ThreadPool::ParallelFor(int64_t n, RangeFunction body) { ParallelFor(n, 1, body); }

void ThreadPool::ParallelFor(int64_t n, int64_t min_chunk, RangeFunction body) {
  if (n <= 0) return;
  min_chunk = std::max<int64_t>(min_chunk, 1);
  const int64_t chunks = std::min<int64_t>({num_threads_, (n + min_chunk - 1) / min_chunk, kMaxChunks});
  if (chunks <= 1 || inside_parallel_body) {
    ParallelBodyScope scope;
    body(0, n);
    return;
  }

  std::lock_guard<std::mutex> call_lock(call_mutex_);
  // No chunk of the previous job is claimable or running (its caller waited
  // for them all), so the fields are free to reuse.
  body_ = &body;
  n_ = n;
  finished_chunks_.store(0, std::memory_order_relaxed);
  const uint32_t generation = GenerationOf(claim_.load(std::memory_order_relaxed)) + 1;
  claim_.store(ClaimWord(generation, chunks, 0), std::memory_order_seq_cst);
  // Pairs with the sleeper's increment before its last look at claim_: either
  // it sees the new job or this sees it asleep.
  if (sleepers_.load(std::memory_order_seq_cst) > 0) {
    { std::lock_guard<std::mutex> lock(sleep_mutex_); }
    job_posted_.notify_all();
  }

  RunChunks(generation);
  // Every chunk is claimed by now; wait for the workers still running theirs.
  for (int spins = 0; finished_chunks_.load(std::memory_order_acquire) < chunks; ++spins) {
    if (spins < kSpinIterations) {
      CpuRelax();
    } else {
      std::this_thread::yield();
    }
  }
}

void ThreadPool::RunChunks(uint32_t generation) {
  ParallelBodyScope scope;
  uint64_t word = claim_.load(std::memory_order_acquire);
  for (;;) {
    if (GenerationOf(word) != generation || NextChunkOf(word) >= ChunksOf(word)) return;
    if (!claim_.compare_exchange_weak(word, word + 1, std::memory_order_acq_rel, std::memory_order_acquire)) {
      continue;
    }
    const int64_t chunks = ChunksOf(word);
    const int64_t chunk = NextChunkOf(word);
    (*body_)(chunk * n_ / chunks, (chunk + 1) * n_ / chunks);
    finished_chunks_.fetch_add(1, std::memory_order_release);
    word = claim_.load(std::memory_order_acquire);
  }
}

uint32_t ThreadPool::WaitForWork(uint32_t seen_generation) {
  for (int spins = 0; spins < kSpinIterations; ++spins) {
    const uint32_t generation = GenerationOf(claim_.load(std::memory_order_acquire));
    if (generation != seen_generation || stopping_.load(std::memory_order_relaxed)) return generation;
    CpuRelax();
  }
  std::unique_lock<std::mutex> lock(sleep_mutex_);
  sleepers_.fetch_add(1, std::memory_order_seq_cst);
  uint32_t generation;
  job_posted_.wait(lock, [&] {
    generation = GenerationOf(claim_.load(std::memory_order_seq_cst));
    return generation != seen_generation || stopping_.load();
  });
  sleepers_.fetch_sub(1, std::memory_order_relaxed);
  return generation;
}

void ThreadPool::WorkerLoop() {
  uint32_t seen_generation = 0;
  for (;;) {
    seen_generation = WaitForWork(seen_generation);
    if (stopping_.load()) return;
    RunChunks(seen_generation);
  }
}

}  // namespace kvjit::cpu
