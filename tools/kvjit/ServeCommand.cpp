// kvjit serve MODEL_OR_KVX: an OpenAI-compatible HTTP server (completions,
// chat completions, streaming, models, health, Prometheus metrics) over the
// in-flight batching scheduler; see docs/serving.md.

#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <thread>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "frontend/gguf/GgufSplit.h"
#include "runtime/core/StatusMacros.h"
#include "runtime/exec/Executable.h"
#include "runtime/schema/KvCacheFormat.h"
#include "tools/kvjit/ChatModel.h"
#include "tools/kvjit/SharedFlags.h"
#include "tools/kvjit/SpeculationFlags.h"
#include "tools/kvjit/Subcommand.h"
#include "tools/serve/HttpServer.h"
#include "tools/serve/SchedulerThread.h"
#include "tools/serve/ServeTextCodec.h"
#include "tools/serve/ServerMetrics.h"

// kvjit run's, read here too.

ABSL_FLAG(std::string, host, "127.0.0.1",
          "the address to listen on; the default answers this machine alone (0.0.0.0: every "
          "interface)");
ABSL_FLAG(int, port, 8000, "the TCP port to listen on (0: any free one, printed at start)");
ABSL_FLAG(std::string, api_key, "",
          "when set (or KVJIT_API_KEY is), /v1/ requests need `Authorization: Bearer KEY`");
ABSL_FLAG(int64_t, max_queued, 256,
          "requests waiting for their first token beyond which new ones get 429");
ABSL_FLAG(std::string, served_model_name, "",
          "the model's name in /v1/models and responses (default: the file's name without its "
          "extension)");
ABSL_FLAG(int, max_connections, 4096,
          "connections held at once, each on its own thread (a streaming client holds one for its "
          "whole stream); more wait to be accepted. The open-file limit is raised to fit");
ABSL_FLAG(int, max_connections_per_address, 256,
          "connections one client address may hold; its next one is answered 429 (0: no limit; "
          "behind a proxy every client has the proxy's address)");
ABSL_FLAG(int, header_timeout_s, 10,
          "a request whose headers take longer than this from its first byte is answered 408 "
          "and its connection closed, however steadily it trickles in");
ABSL_FLAG(int, body_timeout_s, 60,
          "a request whose body takes longer than this after its headers is answered 408");
ABSL_FLAG(int, http_timeout_s, 30,
          "a client that sends or reads nothing for this many seconds is dropped");
ABSL_FLAG(int64_t, max_request_bytes, 8 << 20, "request bodies larger than this get 413");
ABSL_FLAG(int64_t, max_n, 16, "the most choices (n, best_of) one request may ask for");
ABSL_FLAG(bool, access_log, true, "write a line per HTTP request to stderr");
ABSL_FLAG(bool, no_webui, false, "answer / with 404 instead of the chat page");

namespace kvjit::cli {
namespace {

// The file's or directory's name; a split GGUF's name without the part
// number, whichever part was named.
std::string DefaultModelName(const std::string& model_or_kvx) {
  if (std::optional<std::string> prefix = gguf::SplitPrefix(model_or_kvx)) {
    return std::filesystem::path(*prefix).filename().string();
  }
  std::filesystem::path path(model_or_kvx);
  if (!path.has_filename()) path = path.parent_path();
  return path.stem().string();
}

// How the first line names the server's speculative decoding.
std::string SpeculationSetting(const SpeculationChoice& speculation) {
  if (!speculation.enabled()) return "no speculative decoding";
  return absl::StrCat("speculative ", speculation.Name(), " (", speculation.draft_tokens,
                      " draft tokens, while at most ", speculation.max_batch,
                      " sequences decode)");
}

// SIGINT and SIGTERM stop the server: it takes no new connections and ends
// once the requests it is answering are done; a second signal ends the
// process at once. The signals are blocked in every thread (threads inherit
// the mask, so this runs first) and one thread waits for them.
class StopOnSignal {
 public:
  StopOnSignal() {
    sigemptyset(&signals_);
    sigaddset(&signals_, SIGINT);
    sigaddset(&signals_, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &signals_, nullptr);
  }
  ~StopOnSignal() {
    if (!waiter_.joinable()) return;
    // Wakes the waiter, which the server may have outlived.
    done_ = true;
    pthread_kill(waiter_.native_handle(), SIGTERM);
    waiter_.join();
  }
  void Start(serve::HttpServer& server) {
    waiter_ = std::thread([this, &server] {
      int signal_number = 0;
      sigwait(&signals_, &signal_number);
      if (done_) return;
      std::fprintf(stderr,
                   "kvjit serve: stopping once the requests under way are answered (signal "
                   "again to quit now)\n");
      server.Stop();
      sigwait(&signals_, &signal_number);
      if (!done_) std::_Exit(128 + signal_number);
    });
  }

 private:
  sigset_t signals_;
  std::atomic<bool> done_{false};
  std::thread waiter_;
};

absl::Status RunServe(const std::vector<std::string>& arguments) {
  if (arguments.size() != 1) return absl::InvalidArgumentError("expected one MODEL_OR_KVX argument");
  StopOnSignal stop_on_signal;
  KVJIT_ASSIGN_OR_RETURN(ChatModel model, OpenChatModel(arguments[0]));
  std::unique_ptr<runtime::Executable>& executable = model.executable;
  serve::ServeTextCodec& codec = *model.codec;
  std::unique_ptr<runtime::StepRunner>& runner = model.runner;
  KVJIT_ASSIGN_OR_RETURN(const SpeculationChoice speculation, SpeculationFromFlags());
  KVJIT_ASSIGN_OR_RETURN(std::unique_ptr<runtime::Drafter> drafter,
                         MakeDrafter(speculation, arguments[0], *executable, *runner,
                                     absl::GetFlag(FLAGS_threads)));
  serve::SchedulerThreadOptions scheduler_options;
  scheduler_options.max_batch_tokens =
      std::min(absl::GetFlag(FLAGS_max_batch_tokens), runner->max_tokens_per_step());
  scheduler_options.context_length = executable->config().context_length();
  scheduler_options.max_queued = absl::GetFlag(FLAGS_max_queued);
  scheduler_options.drafter = drafter.get();
  scheduler_options.draft_tokens = speculation.draft_tokens;
  scheduler_options.speculation_max_batch = speculation.max_batch;
  serve::ServerMetrics metrics;
  KVJIT_ASSIGN_OR_RETURN(std::unique_ptr<serve::SchedulerThread> scheduler_thread,
                         serve::SchedulerThread::Start(*runner, codec, scheduler_options, metrics));

  serve::HttpServerOptions options;
  options.host = absl::GetFlag(FLAGS_host);
  options.port = absl::GetFlag(FLAGS_port);
  options.api_key = absl::GetFlag(FLAGS_api_key);
  if (const char* key = std::getenv("KVJIT_API_KEY"); options.api_key.empty() && key != nullptr) {
    options.api_key = key;
  }
  options.model_name = absl::GetFlag(FLAGS_served_model_name);
  if (options.model_name.empty()) options.model_name = DefaultModelName(arguments[0]);
  options.max_connections = std::max(1, absl::GetFlag(FLAGS_max_connections));
  options.max_connections_per_address = std::max(0, absl::GetFlag(FLAGS_max_connections_per_address));
  options.header_timeout = std::chrono::seconds(std::max(1, absl::GetFlag(FLAGS_header_timeout_s)));
  options.body_timeout = std::chrono::seconds(std::max(1, absl::GetFlag(FLAGS_body_timeout_s)));
  options.io_timeout = std::chrono::seconds(std::max(1, absl::GetFlag(FLAGS_http_timeout_s)));
  options.max_body_bytes = static_cast<size_t>(std::max<int64_t>(1, absl::GetFlag(FLAGS_max_request_bytes)));
  options.limits.max_choices = std::max<int64_t>(1, absl::GetFlag(FLAGS_max_n));
  options.access_log = absl::GetFlag(FLAGS_access_log);
  options.webui = !absl::GetFlag(FLAGS_no_webui);
  serve::HttpServer server(*scheduler_thread, codec, metrics, options);
  KVJIT_ASSIGN_OR_RETURN(int port, server.Bind());
  std::fprintf(
      stderr,
      "kvjit serve: %s, context %lld tokens, %lld KV blocks of %lld tokens (%s cache, %llu "
      "bytes/token), %lld tokens per step, %s, chat in %s, %s\n",
      options.model_name.c_str(), static_cast<long long>(scheduler_options.context_length),
      static_cast<long long>(runner->num_blocks()), static_cast<long long>(runner->block_size()),
      kvx::KvCacheTypesName(executable->kv_layout().key_type(), executable->kv_layout().value_type()).c_str(),
      static_cast<unsigned long long>(executable->kv_layout().bytes_per_block() /
                                      executable->kv_layout().block_size()),
      static_cast<long long>(scheduler_options.max_batch_tokens),
      SpeculationSetting(speculation).c_str(), codec.chat_format().c_str(),
      options.api_key.empty() ? "no API key" : "API key required");
  std::printf("kvjit serve: listening on http://%s:%d\n", options.host.c_str(), port);
  std::fflush(stdout);
  stop_on_signal.Start(server);
  const absl::Status served = server.Serve();
  scheduler_thread->Stop();
  return served;
}

}  // namespace

Subcommand ServeCommand() {
  return {"serve",
          "an OpenAI-compatible HTTP server (chat and text completions, streaming) over "
          "in-flight batching, with a chat page at /",
          "MODEL_OR_KVX [--host 127.0.0.1] [--port 8000] [--api_key KEY] [--max_batch_tokens N] "
          "[--kv_pool_mib M] [--max_queued N] [--device cpu|cuda] [--speculative ngram|draft:FILE "
          "[--draft_tokens N]] [--no_webui]",
          "tools/kvjit/ServeCommand.cpp", RunServe,
          WithSpeculationFlags({"tp", "block_size", "cache_dtype", "cache_dtype_k", "cache_dtype_v", "cache_rotation", "max_tokens_per_step", "kv_memory_mib", "max_batch_tokens",
           "device", "verify_weights", "threads", "kv_pool_mib", "memory_utilization", "chat_template"})};
}

}  // namespace kvjit::cli
