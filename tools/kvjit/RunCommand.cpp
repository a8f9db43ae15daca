// kvjit run MODEL_OR_KVX -p PROMPT: generate text with the CPU runtime over a
// paged KV cache. stdout carries only the continuation, streamed as it is
// generated; --stats reports TTFT, TPOT, tokens/s and KV blocks on stderr.
// With --beams K above 1 it runs beam search instead, and with --samples N
// above 1 draws N samples at once; both print their sequences at the end.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "runtime/core/ProcessStats.h"
#include "runtime/core/StatusMacros.h"
#include "runtime/generation/BeamSearch.h"
#include "runtime/generation/Generator.h"
#include "runtime/generation/RunnerFactory.h"
#include "runtime/grammar/GrammarCompiler.h"
#include "runtime/exec/Executable.h"
#include "runtime/exec/StepRunner.h"
#include "runtime/kv/KvBlockManager.h"
#include "runtime/sampling/StopChecker.h"
#include "runtime/schema/KvCacheFormat.h"
#include "runtime/tokenizer/ExecutableTokenizer.h"
#include "runtime/tokenizer/StreamingDecoder.h"
#include "tools/kvjit/CompileOnTheFly.h"
#include "tools/kvjit/MemoryReport.h"
#include "tools/kvjit/MultiSequenceOutput.h"
#include "tools/kvjit/GrammarFlags.h"
#include "tools/kvjit/SharedFlags.h"
#include "tools/kvjit/SpeculationFlags.h"
#include "tools/kvjit/Subcommand.h"
#include "tools/serve/ServeTextCodec.h"

ABSL_FLAG(bool, no_parse_special, false,
          "read special tokens' text in -p (e.g. <|im_start|>) as plain text; by default it is the "
          "special token, as llama.cpp and Hugging Face tokenizers read it (--chat never reads "
          "them in the user's text)");
ABSL_FLAG(bool, chat, false,
          "the prompt is a user's message: render it with the model's chat template (or "
          "--chat_template; ChatML for a model without one)");
ABSL_FLAG(int, beams, 1,
          "beam search width; 1 decodes one sequence with the sampling flags above, more runs "
          "beam search (Hugging Face semantics), which ignores them");
ABSL_FLAG(double, length_penalty, 1.0,
          "beam search: a hypothesis' score is its summed log-probabilities divided by its "
          "number of new tokens (end token included) to this power; above 0 favours longer text");
ABSL_FLAG(int, num_return, 1,
          "beam search: print this many of the best hypotheses (at most --beams)");
ABSL_FLAG(std::string, early_stopping, "false",
          "beam search: true (stop once --beams hypotheses are finished), false (also stop once "
          "the best live beam cannot beat them at its current length) or never (once no live "
          "beam can beat them at any length)");

namespace kvjit::cli {
namespace {

// The KV pool's blocks for a run of `sequences` sequences forked from
// `prompt_tokens` tokens, each generating up to `new_tokens`: what they can
// fill, or all that --kv_pool_mib's budget holds where one is given (its
// pages cost memory only once written); a budget that cannot hold what the
// run needs (its beams, or one sequence) is an error naming it. One
// sequence at a time of a model whose every layer slides a window over the
// cache (`window` > 0) needs only the window's blocks, steps of up to
// `tokens_per_step` tokens past it; beam search sizes its own need, without
// the window.
absl::StatusOr<int64_t> KvPoolBlocks(const kvx::KvLayout& layout, int64_t prompt_tokens,
                                     int64_t new_tokens, int64_t sequences,
                                     int64_t sequences_needed_at_once, int64_t window,
                                     int64_t tokens_per_step) {
  const int64_t block_size = layout.block_size();
  const int64_t fill = kv::BlocksForForkedSequences(prompt_tokens, new_tokens, sequences, block_size);
  const int64_t budget_mib = absl::GetFlag(FLAGS_kv_pool_mib);
  if (budget_mib < 0) {
    return absl::InvalidArgumentError(absl::StrCat("--kv_pool_mib must be 0 or more, got ", budget_mib));
  }
  if (budget_mib == 0) return fill;
  KVJIT_ASSIGN_OR_RETURN(int64_t budget_blocks,
                         kv::BlocksForBudget(budget_mib << 20, layout.bytes_per_block()));
  int64_t needed = kv::BlocksForForkedSequences(prompt_tokens, new_tokens,
                                                sequences_needed_at_once, block_size);
  if (window > 0 && sequences_needed_at_once == 1) {
    needed = std::min(needed, kv::BlocksForWindowedSequence(prompt_tokens, tokens_per_step, window,
                                                            block_size));
  }
  if (budget_blocks < needed) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "--kv_pool_mib %d holds %d KV blocks of %d tokens (%d bytes each), but this run needs %d "
        "(%.1f MiB) for %d prompt tokens and %d new ones%s: raise --kv_pool_mib or lower -n",
        budget_mib, budget_blocks, block_size, layout.bytes_per_block(), needed,
        static_cast<double>(needed) * layout.bytes_per_block() / (1 << 20), prompt_tokens,
        new_tokens,
        sequences_needed_at_once > 1 ? absl::StrCat(" in each of ", sequences_needed_at_once, " beams")
                                     : ""));
  }
  return budget_blocks;
}

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

absl::Status RunRun(const std::vector<std::string>& arguments) {
  if (arguments.size() != 1) return absl::InvalidArgumentError("expected one MODEL_OR_KVX argument");
  StartupPhases phases;
  auto phase_start = std::chrono::steady_clock::now();
  KVJIT_ASSIGN_OR_RETURN(std::string kvx_path,
                         ExecutablePathFor(arguments[0], CompileOptionsFromFlags()));
  phases.compile_s = SecondsSince(phase_start);
  phase_start = std::chrono::steady_clock::now();
  KVJIT_ASSIGN_OR_RETURN(std::unique_ptr<runtime::Executable> executable,
                         runtime::Executable::Load(kvx_path, LoadOptionsFromFlags()));
  phases.load_s = SecondsSince(phase_start);
  phase_start = std::chrono::steady_clock::now();
  const uint64_t heap_before_tokenizer = HeapInUse();
  KVJIT_ASSIGN_OR_RETURN(std::unique_ptr<tokenizer::Tokenizer> owned_tokenizer,
                         tokenizer::TokenizerFromExecutable(executable->root()));
  const uint64_t tokenizer_heap = HeapInUse() - heap_before_tokenizer;
  phases.tokenizer_s = SecondsSince(phase_start);

  const bool chat = absl::GetFlag(FLAGS_chat);
  std::vector<int32_t> prompt_ids;
  // With --chat the codec that renders the chat prompt holds the tokenizer.
  std::unique_ptr<serve::ServeTextCodec> chat_codec;
  if (chat) {
    KVJIT_ASSIGN_OR_RETURN(std::string override_template, ChatTemplateFromFlags());
    KVJIT_ASSIGN_OR_RETURN(chat_codec, serve::ServeTextCodec::Create(
                                           std::move(owned_tokenizer),
                                           *executable->root().tokenizer(), override_template));
    if (absl::GetFlag(FLAGS_stats)) std::fprintf(stderr, "chat: %s\n", chat_codec->chat_format().c_str());
    const serve::ChatMessage user = {"user", absl::GetFlag(FLAGS_p)};
    KVJIT_ASSIGN_OR_RETURN(prompt_ids, chat_codec->EncodeChat({user}, nlohmann::ordered_json::array()));
  }
  const tokenizer::Tokenizer* tokenizer = chat ? &chat_codec->tokenizer() : owned_tokenizer.get();
  if (!chat) {
    KVJIT_ASSIGN_OR_RETURN(prompt_ids,
                           tokenizer->Encode(absl::GetFlag(FLAGS_p), /*add_special=*/true,
                                             /*parse_special=*/!absl::GetFlag(FLAGS_no_parse_special)));
  }

  const kvx::KvLayout& layout = executable->kv_layout();
  const int64_t context_length = executable->config().context_length();
  const int64_t prompt_tokens = static_cast<int64_t>(prompt_ids.size());
  if (prompt_tokens >= context_length) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the prompt has ", prompt_tokens, " tokens; the model's context of ", context_length,
        " leaves no room to generate"));
  }
  const bool beam_search = absl::GetFlag(FLAGS_beams) != 1 || absl::GetFlag(FLAGS_num_return) != 1;
  KVJIT_ASSIGN_OR_RETURN(const SpeculationChoice speculation, SpeculationFromFlags());
  if (speculation.enabled() && beam_search) {
    return absl::UnimplementedError("--speculative: beam search does not speculate");
  }
  // Drafts the target rejects sit in the cache until the step that
  // verified them is done.
  const int64_t new_tokens =
      std::min<int64_t>(absl::GetFlag(FLAGS_n) + speculation.draft_tokens, context_length - prompt_tokens);
  const int64_t sequences = beam_search ? absl::GetFlag(FLAGS_beams) : absl::GetFlag(FLAGS_samples);
  KVJIT_ASSIGN_OR_RETURN(
      int64_t blocks, KvPoolBlocks(layout, prompt_tokens, new_tokens, std::max<int64_t>(sequences, 1),
                                   beam_search ? sequences : 1, executable->AttentionWindow(),
                                   executable->program().max_tokens()));
  phase_start = std::chrono::steady_clock::now();
  KVJIT_ASSIGN_OR_RETURN(std::unique_ptr<runtime::StepRunner> runner,
                         runtime::CreateStepRunner(*executable, blocks,
                                                   absl::GetFlag(FLAGS_threads),
                                                   DeviceFromFlags(*executable)));
  phases.allocate_s = SecondsSince(phase_start);

  const sampling::SamplingParams params = SamplingParamsFromFlags();

  sampling::StopConditions conditions;
  for (int32_t id = 0; id < tokenizer->vocab_size(); ++id) {
    if (tokenizer->IsEndOfGeneration(id)) conditions.stop_token_ids.push_back(id);
  }
  conditions.stop_strings = absl::GetFlag(FLAGS_stop);
  conditions.max_tokens = absl::GetFlag(FLAGS_n);
  KVJIT_ASSIGN_OR_RETURN(sampling::StopChecker stop, sampling::StopChecker::Create(conditions));

  const bool stats = absl::GetFlag(FLAGS_stats);
  if (beam_search && absl::GetFlag(FLAGS_samples) != 1) {
    return absl::InvalidArgumentError(
        "--beams/--num_return and --samples are different searches; ask for one of them");
  }
  KVJIT_ASSIGN_OR_RETURN(std::optional<grammar::GrammarSpec> grammar_spec, GrammarFromFlags());
  std::shared_ptr<const grammar::CompiledGrammar> grammar;
  std::optional<grammar::GrammarMatcher> matcher;
  if (grammar_spec) {
    KVJIT_ASSIGN_OR_RETURN(std::unique_ptr<grammar::GrammarCompiler> compiler,
                           grammar::GrammarCompiler::Create(*tokenizer, runner->vocab_size()));
    KVJIT_ASSIGN_OR_RETURN(grammar, compiler->Compile(*grammar_spec));
    matcher = grammar->NewMatcher(conditions.stop_token_ids);
  }
  if (beam_search) {
    runtime::BeamSearchParams beam_params;
    beam_params.request_id = "kvjit run --beams";
    beam_params.num_beams = absl::GetFlag(FLAGS_beams);
    beam_params.num_return_sequences = absl::GetFlag(FLAGS_num_return);
    beam_params.length_penalty = absl::GetFlag(FLAGS_length_penalty);
    KVJIT_ASSIGN_OR_RETURN(beam_params.early_stopping,
                           runtime::ParseEarlyStopping(absl::GetFlag(FLAGS_early_stopping)));
    beam_params.max_new_tokens = absl::GetFlag(FLAGS_n);
    beam_params.eos_token_ids = conditions.stop_token_ids;
    beam_params.grammar = grammar;
    return PrintBeamSearch(*runner, context_length, *tokenizer, prompt_ids, beam_params,
                           conditions, stats);
  }
  KVJIT_ASSIGN_OR_RETURN(std::unique_ptr<runtime::Drafter> drafter,
                         MakeDrafter(speculation, arguments[0], *executable, *runner,
                                     absl::GetFlag(FLAGS_threads)));
  if (absl::GetFlag(FLAGS_samples) != 1) {
    return PrintParallelSamples(*runner, context_length, *tokenizer, prompt_ids, params,
                                absl::GetFlag(FLAGS_samples), absl::GetFlag(FLAGS_max_batch_tokens),
                                conditions, stats, speculation, drafter.get(), grammar);
  }

  tokenizer::StreamingDecoder decoder(*tokenizer);
  runtime::Generator generator(*runner, context_length, drafter.get(), speculation.draft_tokens);
  KVJIT_ASSIGN_OR_RETURN(
      runtime::GenerationResult result,
      generator.Generate(prompt_ids, params, absl::GetFlag(FLAGS_n), [&](int32_t token) {
        if (phases.first_token_s == 0) phases.first_token_s = SecondsSinceProcessStart();
        sampling::StopDecision decision = stop.Append(token, decoder.Push(token));
        std::fputs(decision.text_to_emit.c_str(), stdout);
        std::fflush(stdout);
        return !decision.stop;
      },
      /*on_logits=*/nullptr, matcher ? &*matcher : nullptr));
  if (!stop.stopped()) std::fputs(stop.TakeHeldText().c_str(), stdout);
  // A character the last token left incomplete is printed as its bytes, as
  // llama.cpp prints each token's; only text after a stop string is dropped.
  if (stop.reason() != sampling::StopReason::kStopString) {
    std::fputs(decoder.Flush().c_str(), stdout);
  }
  std::fputs("\n", stdout);
  std::fflush(stdout);

  if (stats) {
    const runtime::GenerationMetrics& m = result.metrics;
    std::fprintf(stderr,
                 "prompt tokens %lld, generated %lld\nTTFT %.2f ms (prefill %.1f tokens/s)\n"
                 "TPOT %.2f ms (decode %.1f tokens/s)\nKV blocks used %d of %lld (%lld tokens "
                 "each)",
                 static_cast<long long>(m.prompt_tokens), static_cast<long long>(m.generated_tokens),
                 m.time_to_first_token_s * 1e3, m.prefill_tokens_per_s,
                 m.time_per_output_token_s * 1e3, m.decode_tokens_per_s, m.peak_kv_blocks,
                 static_cast<long long>(m.kv_blocks_total),
                 static_cast<long long>(layout.block_size()));
    if (const int64_t window = runner->attention_window(); window > 0) {
      std::fprintf(stderr, "; %lld freed behind the %lld-token sliding window",
                   static_cast<long long>(m.kv_blocks_released_by_window),
                   static_cast<long long>(window));
    }
    std::fputs("\n", stderr);
    const uint64_t kv_bytes_per_token = layout.bytes_per_block() / layout.block_size();
    std::fprintf(stderr, "KV cache %s: %llu bytes/token (2048 tokens: %.1f MiB)\n",
                 kvx::KvCacheTypesName(layout.key_type(), layout.value_type()).c_str(),
                 static_cast<unsigned long long>(kv_bytes_per_token),
                 static_cast<double>(kv_bytes_per_token) * 2048 / (1 << 20));
    if (speculation.enabled()) {
      std::fprintf(stderr,
                   "speculative %s: %lld drafted, %lld accepted (%.1f%%) in %lld verify steps, "
                   "%.2f tokens per decode step\n",
                   speculation.Name().c_str(), static_cast<long long>(m.drafted_tokens), static_cast<long long>(m.accepted_tokens),
                   m.drafted_tokens > 0 ? 100.0 * m.accepted_tokens / m.drafted_tokens : 0.0,
                   static_cast<long long>(m.verify_steps),
                   m.generated_tokens > 1
                       ? static_cast<double>(m.generated_tokens - 1) /
                             static_cast<double>(m.generated_tokens - 1 - m.accepted_tokens)
                       : 0.0);
    }
    PrintStartupPhases(phases, stderr);
    PrintMemoryReport(MeasureMemory(*executable, *runner, tokenizer_heap), stderr);
  }
  return absl::OkStatus();
}

}  // namespace

Subcommand RunCommand() {
  return {"run",
          "generate text from a compiled model (.kvx) or a GGUF / Hugging Face model, compiled on "
          "the fly, on the CPU or a GPU",
          "MODEL_OR_KVX -p PROMPT [-n N] [--temperature T [--samples N] | --beams K [--num_return N]] "
          "[--chat] [--stats] [--device cpu|cuda]",
          "tools/kvjit/RunCommand.cpp", RunRun,
          WithGrammarFlags(WithSpeculationFlags({"p", "n", "tp", "block_size", "cache_dtype", "cache_dtype_k", "cache_dtype_v", "cache_rotation", "max_tokens_per_step", "max_batch_tokens", "samples",
           "device", "verify_weights", "threads", "kv_pool_mib", "chat_template", "temperature",
           "top_k", "top_p", "min_p", "repeat_penalty", "seed", "stop", "stats"}))};
}

}  // namespace kvjit::cli
