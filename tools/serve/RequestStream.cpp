#include "tools/serve/RequestStream.h"

namespace kvjit::serve {

const char* ChoiceFinishName(ChoiceFinish finish) {
  switch (finish) {
    case ChoiceFinish::kStop:
      return "stop";
    case ChoiceFinish::kLength:
      return "length";
    case ChoiceFinish::kToolCalls:
      return "tool_calls";
  }
  return "stop";
}

void RequestStream::MarkAccepted() {
  std::lock_guard<std::mutex> lock(mutex_);
  accepted_ = true;
  news_ = true;
  changed_.notify_all();
}

void RequestStream::Push(ChoiceDelta delta) {
  std::lock_guard<std::mutex> lock(mutex_);
  deltas_.push_back(std::move(delta));
  news_ = true;
  changed_.notify_all();
}

void RequestStream::Complete(const RequestUsage& usage) {
  std::lock_guard<std::mutex> lock(mutex_);
  complete_ = true;
  usage_ = usage;
  news_ = true;
  changed_.notify_all();
}

void RequestStream::Fail(absl::Status error) {
  std::lock_guard<std::mutex> lock(mutex_);
  error_ = std::move(error);
  news_ = true;
  changed_.notify_all();
}

RequestStream::Update RequestStream::Wait(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait_for(lock, timeout, [this] { return news_; });
  news_ = false;
  Update update;
  update.deltas.swap(deltas_);
  update.accepted = accepted_;
  update.complete = complete_;
  update.usage = usage_;
  update.error = error_;
  return update;
}

}  // namespace kvjit::serve
