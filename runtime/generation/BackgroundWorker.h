#ifndef KVJIT_RUNTIME_GENERATION_BACKGROUNDWORKER_H_
#define KVJIT_RUNTIME_GENERATION_BACKGROUNDWORKER_H_

#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

namespace kvjit::runtime {

// One thread that runs a task beside its owner's, task after task: what the
// engines compute while a step runs (the next tokens' grammar masks), without
// starting a thread each step (tens of microseconds, a percent of a small
// model's decode step).
class BackgroundWorker {
 public:
  BackgroundWorker();
  ~BackgroundWorker();
  BackgroundWorker(const BackgroundWorker&) = delete;
  BackgroundWorker& operator=(const BackgroundWorker&) = delete;

  // Runs `task` on the worker; the task before it must have been waited for.
  void Start(std::function<void()> task);
  // Returns once the started task is done.
  void Wait();

 private:
  void Loop();

  std::mutex mutex_;
  std::condition_variable changed_;
  std::function<void()> task_;
  bool busy_ = false;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace kvjit::runtime

#endif  // KVJIT_RUNTIME_GENERATION_BACKGROUNDWORKER_H_
