// kvjit chat MODEL_OR_KVX: a conversation on the terminal, as llama.cpp's
// conversation mode holds one. Each line read from stdin is a user's turn;
// the whole conversation is rendered through the model's chat template and
// submitted to one scheduler kept for the session, whose prefix cache holds
// the KV blocks of the earlier turns, so a turn computes little more than
// its own message. Replies stream to stdout; "/reset" forgets the
// conversation and "/exit" or the end of the input ends it. Ctrl-C stops a
// reply and returns to the prompt; at the prompt it ends the session.

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "runtime/core/StatusMacros.h"
#include "runtime/generation/BatchScheduler.h"
#include "runtime/exec/Executable.h"
#include "runtime/exec/StepRunner.h"
#include "runtime/sampling/Sampler.h"
#include "runtime/sampling/StopChecker.h"
#include "runtime/tokenizer/StreamingDecoder.h"
#include "tools/kvjit/ChatHistory.h"
#include "tools/kvjit/ChatModel.h"
#include "tools/kvjit/GrammarFlags.h"
#include "tools/kvjit/SharedFlags.h"
#include "tools/kvjit/SpeculationFlags.h"
#include "tools/kvjit/SpeculationReport.h"
#include "tools/kvjit/Subcommand.h"
#include "tools/serve/ServeTextCodec.h"

ABSL_FLAG(std::string, system, "",
          "the system message that opens the conversation (empty: none, so the chat template's "
          "default system turn applies where it has one)");

namespace kvjit::cli {
namespace {

// Ctrl-C while a reply is generated asks for it to stop; at the prompt it
// ends the process at once with the shell's status for SIGINT, as llama.cpp
// does (what the session printed is already flushed).
std::atomic<bool> reply_interrupted{false};
std::atomic<bool> waiting_at_prompt{false};

void OnInterrupt(int) {
  if (waiting_at_prompt.load()) {
    const char newline = '\n';
    (void)!write(STDERR_FILENO, &newline, 1);
    _exit(128 + SIGINT);
  }
  reply_interrupted.store(true);
}

void HandleInterrupts() {
  struct sigaction action = {};
  action.sa_handler = OnInterrupt;
  sigemptyset(&action.sa_mask);
  // Restarted, so that a reply's writes and the runner's waits are never cut short.
  action.sa_flags = SA_RESTART;
  sigaction(SIGINT, &action, nullptr);
}

struct Reply {
  // What was shown: the text before any stop string, without the end token.
  std::string text;
  bool interrupted = false;
  runtime::RequestMetrics metrics;
};

// Steps `scheduler` until request `id` is done, streaming its text to stdout
// as it is drawn and ending it on a stop string or Ctrl-C.
absl::StatusOr<Reply> StreamReply(runtime::BatchScheduler& scheduler, runtime::RequestId id,
                                  const tokenizer::Tokenizer& tokenizer,
                                  const sampling::StopConditions& conditions) {
  KVJIT_ASSIGN_OR_RETURN(sampling::StopChecker stop, sampling::StopChecker::Create(conditions));
  tokenizer::StreamingDecoder decoder(tokenizer);
  Reply reply;
  auto show = [&reply](const std::string& text) {
    std::fputs(text.c_str(), stdout);
    std::fflush(stdout);
    reply.text += text;
  };
  scheduler.SetTokenObserver([&](const runtime::SampledToken& sampled) {
    const sampling::StopDecision decision = stop.Append(sampled.token, decoder.Push(sampled.token));
    show(decision.text_to_emit);
    return !decision.stop;
  });
  absl::Status stepping = absl::OkStatus();
  while (stepping.ok() && !scheduler.Idle()) {
    if (reply_interrupted.exchange(false)) {
      reply.interrupted = true;
      stepping = scheduler.Cancel(id);
    } else {
      stepping = scheduler.Step();
    }
  }
  // The observer refers to this frame's decoder and checker.
  scheduler.SetTokenObserver(nullptr);
  KVJIT_RETURN_IF_ERROR(stepping);
  if (!stop.stopped()) show(stop.TakeHeldText());
  show(decoder.Flush());
  std::fputs("\n", stdout);
  std::fflush(stdout);
  KVJIT_ASSIGN_OR_RETURN(runtime::RequestResult result, scheduler.TakeResult(id));
  reply.metrics = result.metrics;
  return reply;
}

void PrintReplyStats(const runtime::RequestMetrics& m, const SpeculationChoice& speculation) {
  std::fprintf(stderr,
               "prompt tokens %lld (%lld from the prefix cache), generated %lld\n"
               "TTFT %.2f ms, TPOT %.2f ms\n",
               static_cast<long long>(m.prompt_tokens), static_cast<long long>(m.prefix_cached_tokens),
               static_cast<long long>(m.generated_tokens), m.time_to_first_token_s * 1e3,
               m.time_per_output_token_s * 1e3);
  if (speculation.enabled()) {
    std::fprintf(stderr, "%s\n",
                 SpeculationSummary(speculation.Name(), m.drafted_tokens, m.accepted_tokens,
                                    m.verify_steps)
                     .c_str());
  }
}

// A turn the model cannot be asked (a message spelling a control token, a
// conversation longer than the context) is reported and the session goes on.
void PrintTurnError(const absl::Status& status) {
  std::fprintf(stderr, "kvjit chat: %s\n", std::string(status.message()).c_str());
}

// What one session keeps from turn to turn.
struct ChatSession {
  const serve::ServeTextCodec& codec;
  runtime::BatchScheduler& scheduler;
  sampling::SamplingParams params;
  sampling::StopConditions conditions;
  bool stats = false;
  ChatHistory history;
  SpeculationChoice speculation;
  // Every reply's constraint (--json_schema, --json, --grammar, --regex);
  // null for none.
  std::shared_ptr<const grammar::CompiledGrammar> grammar = nullptr;
};

// One user's turn: the conversation rendered with `user` appended, the reply
// streamed and added to the history. Errors are the session's end (a failed
// step); a turn the model cannot be asked is reported and leaves the history
// as it was.
absl::Status TakeTurn(ChatSession& session, const std::string& user) {
  absl::StatusOr<std::vector<int32_t>> prompt =
      session.codec.EncodeChat(session.history.MessagesFor(user), nlohmann::ordered_json::array());
  if (!prompt.ok()) {
    PrintTurnError(prompt.status());
    return absl::OkStatus();
  }
  absl::StatusOr<runtime::RequestId> id =
      session.scheduler.Submit(*std::move(prompt), session.params, absl::GetFlag(FLAGS_n),
                               session.conditions.stop_token_ids, 1, session.grammar);
  if (!id.ok()) {
    PrintTurnError(absl::Status(id.status().code(),
                                absl::StrCat(id.status().message(), " (/reset starts over)")));
    return absl::OkStatus();
  }
  reply_interrupted = false;
  KVJIT_ASSIGN_OR_RETURN(Reply reply, StreamReply(session.scheduler, *id, session.codec.tokenizer(),
                                                  session.conditions));
  if (reply.interrupted) std::fprintf(stderr, "kvjit chat: reply stopped\n");
  if (session.stats) PrintReplyStats(reply.metrics, session.speculation);
  // An interrupted reply stays in the conversation as far as it was shown,
  // as llama.cpp keeps it in its context.
  session.history.AddExchange(user, std::move(reply.text));
  return absl::OkStatus();
}

// Reads the turns from stdin until /exit or the end of the input.
absl::Status Converse(ChatSession& session) {
  // Piped input gets no prompt marker, so a script reads only the replies.
  const bool interactive = isatty(STDIN_FILENO) != 0;
  if (interactive) {
    std::fprintf(stderr, "kvjit chat: /reset forgets the conversation, /exit or Ctrl-D ends it, "
                         "Ctrl-C stops a reply\n");
  }
  HandleInterrupts();
  std::string line;
  while (true) {
    if (interactive) std::fputs("> ", stderr);
    waiting_at_prompt = true;
    const bool got_line = static_cast<bool>(std::getline(std::cin, line));
    waiting_at_prompt = false;
    if (!got_line) return absl::OkStatus();
    if (!line.empty() && line.back() == '\r') line.pop_back();
    switch (ClassifyChatLine(line)) {
      case ChatLine::kExit:
        return absl::OkStatus();
      case ChatLine::kEmpty:
        break;
      case ChatLine::kReset:
        session.history.Clear();
        std::fprintf(stderr, "kvjit chat: the conversation is forgotten\n");
        break;
      case ChatLine::kMessage:
        KVJIT_RETURN_IF_ERROR(TakeTurn(session, line));
        break;
    }
  }
}

absl::Status RunChat(const std::vector<std::string>& arguments) {
  if (arguments.size() != 1) return absl::InvalidArgumentError("expected one MODEL_OR_KVX argument");
  KVJIT_ASSIGN_OR_RETURN(ChatModel model, OpenChatModel(arguments[0]));
  std::unique_ptr<runtime::Executable>& executable = model.executable;
  std::unique_ptr<serve::ServeTextCodec>& codec = model.codec;
  std::unique_ptr<runtime::StepRunner>& runner = model.runner;
  KVJIT_ASSIGN_OR_RETURN(const SpeculationChoice speculation, SpeculationFromFlags());
  KVJIT_ASSIGN_OR_RETURN(std::unique_ptr<runtime::Drafter> drafter,
                         MakeDrafter(speculation, arguments[0], *executable, *runner,
                                     absl::GetFlag(FLAGS_threads)));
  runtime::BatchSchedulerOptions scheduler_options;
  // One request at a time: its prompt goes in the largest chunks the program takes.
  scheduler_options.max_batch_tokens = runner->max_tokens_per_step();
  scheduler_options.context_length = executable->config().context_length();
  scheduler_options.enable_prefix_caching = true;
  scheduler_options.drafter = drafter.get();
  scheduler_options.draft_tokens = speculation.draft_tokens;
  scheduler_options.speculation_max_batch = speculation.max_batch;
  KVJIT_ASSIGN_OR_RETURN(runtime::BatchScheduler scheduler,
                         runtime::BatchScheduler::Create(*runner, scheduler_options));

  ChatSession session{*codec, scheduler, SamplingParamsFromFlags(), {}, absl::GetFlag(FLAGS_stats),
                      ChatHistory(absl::GetFlag(FLAGS_system)), speculation};
  session.conditions.stop_token_ids = codec->EndOfGenerationTokens();
  session.conditions.stop_strings = absl::GetFlag(FLAGS_stop);
  session.conditions.max_tokens = absl::GetFlag(FLAGS_n);
  // Bad sampling flags, stop strings or -n are refused before the first
  // turn, not reported at every one.
  KVJIT_RETURN_IF_ERROR(sampling::ValidateSamplingParams(session.params));
  KVJIT_RETURN_IF_ERROR(sampling::StopChecker::Create(session.conditions).status());
  KVJIT_ASSIGN_OR_RETURN(std::optional<grammar::GrammarSpec> grammar_spec, GrammarFromFlags());
  if (grammar_spec) {
    KVJIT_ASSIGN_OR_RETURN(session.grammar, codec->CompileGrammar(*grammar_spec));
  }
  if (session.stats) std::fprintf(stderr, "chat: %s\n", codec->chat_format().c_str());
  return Converse(session);
}

}  // namespace

Subcommand ChatCommand() {
  return {"chat",
          "a conversation with a model on the terminal: each line a user's turn, replies "
          "streamed, earlier turns' KV blocks reused from the prefix cache",
          "MODEL_OR_KVX [--system TEXT] [-n N] [--temperature T] [--speculative ngram|draft:FILE "
          "[--draft_tokens N]] [--stats] (then /reset, /exit)",
          "tools/kvjit/ChatCommand.cpp", RunChat,
          WithGrammarFlags(WithSpeculationFlags({"n", "tp", "block_size", "cache_dtype", "cache_dtype_k", "cache_dtype_v", "cache_rotation", "max_tokens_per_step", "kv_memory_mib", "device",
           "verify_weights", "threads", "kv_pool_mib", "memory_utilization", "chat_template", "temperature", "top_k",
           "top_p", "min_p", "repeat_penalty", "seed", "stop", "stats"}))};
}

}  // namespace kvjit::cli
