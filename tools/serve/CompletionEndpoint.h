#ifndef KVJIT_TOOLS_SERVE_COMPLETIONENDPOINT_H_
#define KVJIT_TOOLS_SERVE_COMPLETIONENDPOINT_H_

#include <chrono>
#include <string>

#include "absl/status/statusor.h"
#include "httplib.h"
#include "tools/serve/CompletionRequest.h"
#include "tools/serve/SchedulerThread.h"
#include "tools/serve/TextCodec.h"

namespace kvjit::serve {

// Answers an error: its HTTP status (`http_status`, or the one
// HttpStatusFor gives when 0) and OpenAI error body, and Retry-After where a
// retry may succeed (429, 503).
void ReplyWithError(const absl::Status& error, httplib::Response& response, int http_status = 0);

// POST /v1/completions and /v1/chat/completions: reads and checks the
// request, tokenizes it, hands it to the scheduler thread and answers with
// the whole response or, for `stream`, server-sent events (`data: {chunk}`
// lines and `data: [DONE]`). A client that goes away while its request runs
// cancels it.
class CompletionEndpoint {
 public:
  // `scheduler_thread` and `codec` must outlive this.
  CompletionEndpoint(SchedulerThread& scheduler_thread, const TextCodec& codec,
                     std::string model_name, CompletionRequestLimits limits)
      : scheduler_thread_(scheduler_thread),
        codec_(codec),
        model_name_(std::move(model_name)),
        limits_(limits) {}

  void Handle(ApiKind kind, const httplib::Request& http_request, httplib::Response& response) const;

  // The request as the scheduler thread runs it: tokenized, checked against
  // the context and the vocabulary, with the endpoint's defaults filled in.
  absl::StatusOr<TokenizedRequest> ToTokenizedRequest(
      const CompletionRequest& request, std::chrono::steady_clock::time_point arrival) const;

 private:
  absl::StatusOr<std::vector<int32_t>> PromptTokens(const CompletionRequest& request) const;

  SchedulerThread& scheduler_thread_;
  const TextCodec& codec_;
  std::string model_name_;
  CompletionRequestLimits limits_;
};

}  // namespace kvjit::serve

#endif  // KVJIT_TOOLS_SERVE_COMPLETIONENDPOINT_H_
