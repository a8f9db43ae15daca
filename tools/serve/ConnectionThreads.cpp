#include "tools/serve/ConnectionThreads.h"

#include <pthread.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <utility>

namespace kvjit::serve {
namespace {

// What a connection's thread runs: the connection, then `done`.
struct ThreadStart {
  std::function<void()> connection;
  std::function<void()> done;
};

void* RunConnection(void* argument) {
  std::unique_ptr<ThreadStart> start(static_cast<ThreadStart*>(argument));
  start->connection();
  start->done();
  return nullptr;
}

}  // namespace

ConnectionThreads::ConnectionThreads(int max_threads)
    : max_threads_(max_threads), count_(std::make_shared<Count>()) {}

ConnectionThreads::~ConnectionThreads() { shutdown(); }

void ConnectionThreads::enqueue(std::function<void()> connection) {
  std::unique_lock<std::mutex> lock(count_->mutex);
  pthread_attr_t attributes;
  pthread_attr_init(&attributes);
  pthread_attr_setdetachstate(&attributes, PTHREAD_CREATE_DETACHED);
  bool reported = false;
  for (;;) {
    count_->changed.wait(lock, [this] { return count_->running < max_threads_; });
    auto start = std::make_unique<ThreadStart>();
    start->connection = std::move(connection);
    start->done = [count = count_] {
      std::lock_guard<std::mutex> done_lock(count->mutex);
      --count->running;
      count->changed.notify_all();
    };
    pthread_t thread;
    const int error = pthread_create(&thread, &attributes, RunConnection, start.get());
    if (error == 0) {
      start.release();
      ++count_->running;
      break;
    }
    // Out of threads or memory for one (the system's limit, not ours): the
    // connection waits for another to end, or a moment.
    connection = std::move(start->connection);
    if (!reported) {
      std::fprintf(stderr,
                   "kvjit serve: cannot start a thread for a connection (%s) with %d running; "
                   "it waits for one to end\n",
                   std::strerror(error), count_->running);
      reported = true;
    }
    count_->changed.wait_for(lock, std::chrono::milliseconds(100));
  }
  pthread_attr_destroy(&attributes);
}

void ConnectionThreads::shutdown() {
  std::unique_lock<std::mutex> lock(count_->mutex);
  count_->changed.wait(lock, [this] { return count_->running == 0; });
}

}  // namespace kvjit::serve
