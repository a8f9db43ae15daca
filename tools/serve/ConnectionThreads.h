#ifndef KVJIT_TOOLS_SERVE_CONNECTIONTHREADS_H_
#define KVJIT_TOOLS_SERVE_CONNECTIONTHREADS_H_

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>

#include "httplib.h"

namespace kvjit::serve {

// cpp-httplib's task queue as a thread per connection, started when the
// connection is accepted, up to `max_threads` at once; past that the accept
// loop waits for one to end (new connections wait in the listen backlog).
//
// Why not the library's ThreadPool: a connection holds its thread for its
// whole life, reading its request included, so a fixed pool of N threads is
// starved by N clients that send slowly or not at all, and a streaming
// client holds one for minutes. A thread blocked on its socket costs little
// (its stack is reserved address space, touched only as used), so the cap
// can be the number of connections the server will hold at all.
class ConnectionThreads : public httplib::TaskQueue {
 public:
  explicit ConnectionThreads(int max_threads);
  ~ConnectionThreads() override;

  void enqueue(std::function<void()> connection) override;
  // Waits for every connection's thread to end.
  void shutdown() override;

 private:
  // Shared with the detached threads, each of which may outlive the queue
  // by the few instructions after it says it is done.
  struct Count {
    std::mutex mutex;
    std::condition_variable changed;
    int running = 0;
  };

  const int max_threads_;
  std::shared_ptr<Count> count_;
};

}  // namespace kvjit::serve

#endif  // KVJIT_TOOLS_SERVE_CONNECTIONTHREADS_H_
