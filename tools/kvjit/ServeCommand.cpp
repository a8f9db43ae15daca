// kvjit serve MODEL_OR_KVX: an OpenAI-compatible HTTP server (completions,
// chat completions, streaming, models, health, Prometheus metrics) over the
// in-flight batching scheduler; see docs/serving.md.

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <thread>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "runtime/core/StatusMacros.h"
#include "runtime/engine/RunnerFactory.h"
#include "runtime/exec/Executable.h"
#include "runtime/kv/KvBlockManager.h"
#include "runtime/serve/Engine.h"
#include "runtime/serve/HttpServer.h"
#include "runtime/serve/ServerMetrics.h"
#include "tools/kvjit/CompileOnTheFly.h"
#include "tools/kvjit/KvxTokenizer.h"
#include "tools/kvjit/ServeTextCodec.h"
#include "tools/kvjit/SharedFlags.h"
#include "tools/kvjit/Subcommand.h"

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
ABSL_FLAG(int, http_threads, 128,
          "connections served at once; each streaming client holds one for its whole stream");
ABSL_FLAG(int, http_timeout_s, 30,
          "a client that sends or reads nothing for this many seconds is dropped");
ABSL_FLAG(int64_t, max_request_bytes, 8 << 20, "request bodies larger than this get 413");
ABSL_FLAG(int64_t, max_n, 16, "the most choices (n, best_of) one request may ask for");
ABSL_FLAG(bool, access_log, true, "write a line per HTTP request to stderr");
ABSL_FLAG(double, memory_utilization, 0,
          "the share of the machine's memory the server may take, as vLLM's "
          "gpu_memory_utilization: the KV pool gets what it leaves after the weights and the "
          "activation arena (its pages resident only once written); 0: --kv_pool_mib decides");

namespace kvjit::cli {
namespace {

std::string DefaultModelName(const std::string& model_or_kvx) {
  std::filesystem::path path(model_or_kvx);
  if (!path.has_filename()) path = path.parent_path();
  return path.stem().string();
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

// The KV pool's blocks: what --memory_utilization of the machine's memory
// leaves after the weights and the activation arena (vLLM's
// gpu_memory_utilization, for the CPU's memory), else --kv_pool_mib, else
// the budget the executable was compiled for (--kv_memory_mib).
absl::StatusOr<int64_t> PoolBlocks(const runtime::Executable& executable) {
  const kvx::KvLayout& layout = executable.kv_layout();
  const double utilization = absl::GetFlag(FLAGS_memory_utilization);
  if (utilization != 0) {
    if (!(utilization > 0 && utilization <= 1)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--memory_utilization must be in (0, 1], got ", utilization));
    }
    if (DeviceFromFlags(executable) != "cpu") {
      return absl::UnimplementedError(
          "--memory_utilization sizes the pool from the CPU's memory; on a GPU give --kv_pool_mib");
    }
    const double total = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGESIZE);
    double weights = 0;
    for (const MappedFile& file : executable.weight_files()) weights += file.bytes().size();
    const double arena = static_cast<double>(executable.program().arena_bytes());
    const double budget = utilization * total - weights - arena;
    if (budget < static_cast<double>(layout.bytes_per_block())) {
      return absl::ResourceExhaustedError(absl::StrFormat(
          "--memory_utilization %.2f of %.0f MiB leaves no KV block after the weights (%.0f MiB) "
          "and the activation arena (%.0f MiB)",
          utilization, total / (1 << 20), weights / (1 << 20), arena / (1 << 20)));
    }
    return kv::BlocksForBudget(static_cast<int64_t>(budget), static_cast<int64_t>(layout.bytes_per_block()));
  }
  const int64_t mib = absl::GetFlag(FLAGS_kv_pool_mib);
  if (mib == 0) return static_cast<int64_t>(layout.default_blocks());
  return kv::BlocksForBudget(mib << 20, static_cast<int64_t>(layout.bytes_per_block()));
}

absl::Status RunServe(const std::vector<std::string>& arguments) {
  if (arguments.size() != 1) return absl::InvalidArgumentError("expected one MODEL_OR_KVX argument");
  StopOnSignal stop_on_signal;
  KVJIT_ASSIGN_OR_RETURN(std::string kvx_path,
                         ExecutablePathFor(arguments[0], CompileOptionsFromFlags()));
  KVJIT_ASSIGN_OR_RETURN(std::unique_ptr<runtime::Executable> executable,
                         runtime::Executable::Load(kvx_path, LoadOptionsFromFlags()));
  KVJIT_ASSIGN_OR_RETURN(std::unique_ptr<tokenizer::Tokenizer> tokenizer,
                         TokenizerFromExecutable(executable->root()));
  KVJIT_ASSIGN_OR_RETURN(std::string override_template, ChatTemplateFromFlags());
  KVJIT_ASSIGN_OR_RETURN(std::unique_ptr<ServeTextCodec> codec_owner,
                         ServeTextCodec::Create(std::move(tokenizer), *executable->root().tokenizer(),
                                                override_template));
  ServeTextCodec& codec = *codec_owner;

  KVJIT_ASSIGN_OR_RETURN(int64_t blocks, PoolBlocks(*executable));
  KVJIT_ASSIGN_OR_RETURN(std::unique_ptr<runtime::StepRunner> runner,
                         runtime::CreateStepRunner(*executable, blocks,
                                                   absl::GetFlag(FLAGS_threads),
                                                   DeviceFromFlags(*executable)));
  serve::EngineOptions engine_options;
  engine_options.max_batch_tokens =
      std::min(absl::GetFlag(FLAGS_max_batch_tokens), runner->max_tokens_per_step());
  engine_options.context_length = executable->config().context_length();
  engine_options.max_queued = absl::GetFlag(FLAGS_max_queued);
  serve::ServerMetrics metrics;
  KVJIT_ASSIGN_OR_RETURN(std::unique_ptr<serve::Engine> engine,
                         serve::Engine::Start(*runner, codec, engine_options, metrics));

  serve::HttpServerOptions options;
  options.host = absl::GetFlag(FLAGS_host);
  options.port = absl::GetFlag(FLAGS_port);
  options.api_key = absl::GetFlag(FLAGS_api_key);
  if (const char* key = std::getenv("KVJIT_API_KEY"); options.api_key.empty() && key != nullptr) {
    options.api_key = key;
  }
  options.model_name = absl::GetFlag(FLAGS_served_model_name);
  if (options.model_name.empty()) options.model_name = DefaultModelName(arguments[0]);
  options.http_threads = std::max(1, absl::GetFlag(FLAGS_http_threads));
  options.io_timeout = std::chrono::seconds(std::max(1, absl::GetFlag(FLAGS_http_timeout_s)));
  options.max_body_bytes = static_cast<size_t>(std::max<int64_t>(1, absl::GetFlag(FLAGS_max_request_bytes)));
  options.limits.max_choices = std::max<int64_t>(1, absl::GetFlag(FLAGS_max_n));
  options.access_log = absl::GetFlag(FLAGS_access_log);
  serve::HttpServer server(*engine, codec, metrics, options);
  KVJIT_ASSIGN_OR_RETURN(int port, server.Bind());
  std::fprintf(stderr,
               "kvjit serve: %s, context %lld tokens, %lld KV blocks of %lld tokens, %lld tokens "
               "per step, chat in %s, %s\n",
               options.model_name.c_str(), static_cast<long long>(engine_options.context_length),
               static_cast<long long>(runner->num_blocks()),
               static_cast<long long>(runner->block_size()),
               static_cast<long long>(engine_options.max_batch_tokens), codec.chat_format().c_str(),
               options.api_key.empty() ? "no API key" : "API key required");
  std::printf("kvjit serve: listening on http://%s:%d\n", options.host.c_str(), port);
  std::fflush(stdout);
  stop_on_signal.Start(server);
  const absl::Status served = server.Serve();
  engine->Stop();
  return served;
}

}  // namespace

Subcommand ServeCommand() {
  return {"serve",
          "an OpenAI-compatible HTTP server (chat and text completions, streaming) over "
          "in-flight batching",
          "MODEL_OR_KVX [--host 127.0.0.1] [--port 8000] [--api_key KEY] [--max_batch_tokens N] "
          "[--kv_pool_mib M] [--max_queued N] [--device cpu|cuda]",
          "tools/kvjit/ServeCommand.cpp", RunServe,
          {"block_size", "cache_dtype", "max_tokens_per_step", "kv_memory_mib", "max_batch_tokens",
           "device", "verify_weights", "threads", "kv_pool_mib", "chat_template"}};
}

}  // namespace kvjit::cli
