#include "tools/serve/bench/BenchServeClient.h"

#include <chrono>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "httplib.h"

namespace kvjit::bench_serve {
namespace {

using Clock = std::chrono::steady_clock;

httplib::Headers AuthHeaders(const std::string& api_key) {
  httplib::Headers headers;
  if (!api_key.empty()) headers.emplace("Authorization", "Bearer " + api_key);
  return headers;
}

// Reads server-sent events as they arrive: "data: {json}" events separated
// by blank lines, "data: [DONE]" at the end.
class EventReader {
 public:
  EventReader(RequestTiming& timing, Clock::time_point sent, bool chat)
      : timing_(timing), sent_(sent), chat_(chat) {}

  void Add(const char* data, size_t length) {
    buffer_.append(data, length);
    size_t end;
    while ((end = buffer_.find("\n\n")) != std::string::npos) {
      const std::string event = buffer_.substr(0, end);
      buffer_.erase(0, end + 2);
      if (absl::StartsWith(event, "data: ")) OnData(event.substr(6));
    }
  }

 private:
  void OnData(const std::string& data) {
    if (data == "[DONE]") return;
    const nlohmann::json chunk = nlohmann::json::parse(data, nullptr, /*allow_exceptions=*/false);
    if (!chunk.is_object()) return;
    if (chunk.contains("error")) {
      timing_.error = chunk["error"].dump();
      return;
    }
    if (const auto usage = chunk.find("usage"); usage != chunk.end() && usage->is_object()) {
      timing_.prompt_tokens = usage->value("prompt_tokens", int64_t{-1});
      timing_.completion_tokens = usage->value("completion_tokens", int64_t{-1});
    }
    const auto choices = chunk.find("choices");
    if (choices == chunk.end() || !choices->is_array() || choices->empty()) return;
    const nlohmann::json& choice = choices->front();
    std::string text;
    if (chat_) {
      const auto delta = choice.find("delta");
      if (delta != choice.end() && delta->contains("content") && (*delta)["content"].is_string()) {
        text = (*delta)["content"].get<std::string>();
      }
    } else if (choice.contains("text") && choice["text"].is_string()) {
      text = choice["text"].get<std::string>();
    }
    if (choice.contains("finish_reason") && choice["finish_reason"].is_string()) {
      timing_.finish_reason = choice["finish_reason"].get<std::string>();
    }
    if (text.empty()) return;
    const double at = std::chrono::duration<double>(Clock::now() - sent_).count();
    if (timing_.text_chunks == 0) {
      timing_.time_to_first_token_s = at;
    } else {
      timing_.inter_token_latencies_s.push_back(at - last_text_at_);
    }
    last_text_at_ = at;
    ++timing_.text_chunks;
    timing_.text += text;
  }

  RequestTiming& timing_;
  Clock::time_point sent_;
  bool chat_;
  std::string buffer_;
  double last_text_at_ = 0;
};

}  // namespace

absl::StatusOr<std::string> FirstServedModel(const std::string& base_url,
                                             const std::string& api_key) {
  httplib::Client client(base_url);
  client.set_read_timeout(std::chrono::seconds(30));
  httplib::Result result = client.Get("/v1/models", AuthHeaders(api_key));
  if (!result) {
    return absl::UnavailableError(absl::StrCat("cannot reach ", base_url, "/v1/models: ",
                                               httplib::to_string(result.error())));
  }
  const nlohmann::json models = nlohmann::json::parse(result->body, nullptr, false);
  if (result->status != 200 || !models.is_object() || !models.contains("data") ||
      !models["data"].is_array() || models["data"].empty() ||
      !models["data"][0].contains("id") || !models["data"][0]["id"].is_string()) {
    return absl::FailedPreconditionError(absl::StrCat(
        base_url, "/v1/models answered ", result->status, " without a model: ", result->body));
  }
  return models["data"][0]["id"].get<std::string>();
}

RequestTiming SendStreaming(const ServedEndpoint& endpoint, const BenchServeRequest& request) {
  const bool chat = absl::StrContains(endpoint.path, "chat");
  nlohmann::json body = {{"model", endpoint.model},
                         {"max_tokens", request.max_tokens},
                         {"temperature", 0},
                         {"stream", true},
                         {"stream_options", {{"include_usage", true}}}};
  if (chat) {
    body["messages"] = {{{"role", "user"}, {"content", request.prompt}}};
  } else {
    body["prompt"] = request.prompt;
  }
  body.update(endpoint.extra_body);

  RequestTiming timing;
  httplib::Client client(endpoint.base_url);
  client.set_read_timeout(std::chrono::minutes(10));
  httplib::Request http_request;
  http_request.method = "POST";
  http_request.path = endpoint.path;
  http_request.headers = AuthHeaders(endpoint.api_key);
  http_request.headers.emplace("Content-Type", "application/json");
  http_request.body = body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  std::string error_body;
  const Clock::time_point sent = Clock::now();
  EventReader reader(timing, sent, chat);
  int status = 0;
  http_request.response_handler = [&](const httplib::Response& response) {
    status = response.status;
    return true;
  };
  http_request.content_receiver = [&](const char* data, size_t length, uint64_t, uint64_t) {
    if (status == 200) {
      reader.Add(data, length);
    } else {
      error_body.append(data, length);
    }
    return true;
  };
  httplib::Result result = client.send(http_request);
  timing.end_to_end_s = std::chrono::duration<double>(Clock::now() - sent).count();
  if (!result) {
    timing.error = absl::StrCat("no answer: ", httplib::to_string(result.error()));
  } else if (status != 200) {
    timing.error = absl::StrCat("HTTP ", status, ": ", error_body);
  } else if (timing.error.empty() && timing.text_chunks == 0) {
    timing.error = "the stream carried no text";
  }
  timing.ok = timing.error.empty();
  return timing;
}

}  // namespace kvjit::bench_serve
