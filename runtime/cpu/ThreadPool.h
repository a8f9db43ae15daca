#ifndef KVJIT_RUNTIME_CPU_THREADPOOL_H_
#define KVJIT_RUNTIME_CPU_THREADPOOL_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <type_traits>
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
// blocked thread costs tens of microseconds) and then block. Posting a job
// and claiming its chunks take no lock (a decode step makes a few hundred
// calls, and a contended mutex puts a thread to sleep in the kernel), and no
// allocation: the body is borrowed, not copied into a std::function.
class ThreadPool {
 public:
  // A borrowed callable body(begin, end): two pointers, valid while the
  // callable it was made from lives. Pass lambdas straight to ParallelFor
  // (they live until it returns); never keep a RangeFunction made from a
  // temporary.
  class RangeFunction {
   public:
    template <class Body, class = std::enable_if_t<!std::is_same_v<std::decay_t<Body>, RangeFunction>>>
    RangeFunction(const Body& body)  // NOLINT(google-explicit-constructor): lambdas convert implicitly
        : body_(&body), call_([](const void* b, int64_t begin, int64_t end) {
            (*static_cast<const Body*>(b))(begin, end);
          }) {}
    void operator()(int64_t begin, int64_t end) const { call_(body_, begin, end); }

   private:
    const void* body_;
    void (*call_)(const void* body, int64_t begin, int64_t end);
  };

  // num_threads <= 0 means std::thread::hardware_concurrency() (at least 1).
  explicit ThreadPool(int num_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return num_threads_; }

  // Calls body(begin, end) over contiguous chunks covering [0, n), at most one
  // chunk per thread, and returns when all have run. Calls from inside a body
  // run inline on the calling thread; calls from several outside threads take
  // turns. A body must not throw: ParallelFor would unwind while workers still
  // run chunks of a body that no longer exists (kernels report errors as
  // values, checked before they split work).
  void ParallelFor(int64_t n, RangeFunction body);
  // As above, with chunks of at least min_chunk indices (the last may be
  // shorter only when n itself is), for bodies too cheap to split finely.
  void ParallelFor(int64_t n, int64_t min_chunk, RangeFunction body);

 private:
  void WorkerLoop();
  // Claims and runs chunks of the job posted as `generation` until none are
  // left (or a later job has replaced it).
  void RunChunks(uint32_t generation);
  // Returns the generation of the next job posted after seen_generation.
  uint32_t WaitForWork(uint32_t seen_generation);

  const int num_threads_;
  std::vector<std::thread> workers_;

  // Serializes ParallelFor calls made from different outside threads.
  std::mutex call_mutex_;

  // The current job. Its claim word packs the job's generation (high 32
  // bits), its chunk count (bits 16..31) and the next chunk to hand out (low
  // 16 bits); chunks are claimed by compare-and-swap, so no thread ever
  // blocks on another to take work. body_ and n_ are written before the
  // word is published and read only by a thread whose claim succeeded: the
  // job is then unfinished, and its caller does not touch them again until
  // every claimed chunk has finished. They share the claim word's cache
  // line (a claiming worker reads all three at once); the finish counter,
  // written by every thread at the end of its chunk, and the sleep state
  // have lines of their own, so a worker spinning on the claim word does
  // not pull the line away from a thread counting itself done.
  alignas(64) std::atomic<uint64_t> claim_{0};
  const RangeFunction* body_ = nullptr;
  int64_t n_ = 0;
  alignas(64) std::atomic<int64_t> finished_chunks_{0};

  // Workers spin on claim_ for a while and then sleep here; a poster takes
  // the mutex and notifies only when someone sleeps.
  alignas(64) std::atomic<int> sleepers_{0};
  std::atomic<bool> stopping_{false};
  std::mutex sleep_mutex_;
  std::condition_variable job_posted_;
};

}  // namespace kvjit::cpu

#endif  // KVJIT_RUNTIME_CPU_THREADPOOL_H_
