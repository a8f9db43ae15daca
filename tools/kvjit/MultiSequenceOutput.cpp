#include "tools/kvjit/MultiSequenceOutput.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>

#include "runtime/tokenizer/StreamingDecoder.h"
#include "runtime/core/StatusMacros.h"
#include "runtime/generation/BatchScheduler.h"
#include "tools/kvjit/SpeculationReport.h"

namespace kvjit::cli {
namespace {

// A sequence's text as streaming would have shown it: the end token's text
// left out, and cut before the first stop string.
absl::StatusOr<std::string> SequenceText(const tokenizer::Tokenizer& tokenizer,
                                           sampling::StopConditions conditions,
                                           const std::vector<int32_t>& tokens) {
  conditions.max_tokens.reset();
  KVJIT_ASSIGN_OR_RETURN(sampling::StopChecker stop, sampling::StopChecker::Create(conditions));
  tokenizer::StreamingDecoder decoder(tokenizer);
  std::string text;
  for (int32_t token : tokens) {
    sampling::StopDecision decision = stop.Append(token, decoder.Push(token));
    text += decision.text_to_emit;
    if (decision.stop) return text;
  }
  text += stop.TakeHeldText();
  text += decoder.Flush();
  return text;
}

}  // namespace

absl::Status PrintBeamSearch(runtime::StepRunner& runner, int64_t context_length,
                             const tokenizer::Tokenizer& tokenizer,
                             const std::vector<int32_t>& prompt_ids,
                             const runtime::BeamSearchParams& params,
                             const sampling::StopConditions& conditions, bool stats) {
  runtime::BeamSearch search(runner, context_length);
  const auto start = std::chrono::steady_clock::now();
  KVJIT_ASSIGN_OR_RETURN(runtime::BeamSearchResult result, search.Search(prompt_ids, params));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  const std::vector<runtime::BeamHypothesis>& hypotheses = result.hypotheses;
  for (size_t i = 0; i < hypotheses.size(); ++i) {
    KVJIT_ASSIGN_OR_RETURN(std::string text,
                           SequenceText(tokenizer, conditions, hypotheses[i].tokens));
    if (params.num_return_sequences > 1) {
      std::printf(
          "=== hypothesis %zu of %zu: score %.4f, log-probability %.4f, %zu tokens, %s ===\n",
          i + 1, hypotheses.size(), hypotheses[i].score, hypotheses[i].sum_logprobs,
          hypotheses[i].tokens.size(),
          std::string(sampling::StopReasonName(hypotheses[i].finish_reason)).c_str());
    }
    std::printf("%s\n", text.c_str());
  }
  std::fflush(stdout);

  if (stats) {
    const runtime::BeamSearchStats& s = result.stats;
    std::fprintf(stderr,
                 "prompt tokens %lld, %d beams, %lld decode steps in %.2f s\n"
                 "KV blocks peak %d of %lld (%lld tokens each); %d without sharing; %d shared at "
                 "most; %lld copied on write\n",
                 static_cast<long long>(s.prompt_tokens), params.num_beams,
                 static_cast<long long>(s.decode_steps), seconds, s.peak_kv_blocks,
                 static_cast<long long>(runner.num_blocks()), static_cast<long long>(runner.block_size()),
                 s.peak_kv_blocks_unshared, s.peak_blocks_shared,
                 static_cast<long long>(s.blocks_copied));
  }
  return absl::OkStatus();
}

absl::Status PrintParallelSamples(runtime::StepRunner& runner, int64_t context_length,
                                  const tokenizer::Tokenizer& tokenizer,
                                  const std::vector<int32_t>& prompt_ids,
                                  const sampling::SamplingParams& params, int64_t num_samples,
                                  int64_t max_batch_tokens,
                                  const sampling::StopConditions& conditions, bool stats,
                                  const SpeculationChoice& speculation, runtime::Drafter* drafter,
                                  std::shared_ptr<const grammar::CompiledGrammar> grammar) {
  runtime::BatchSchedulerOptions options;
  options.max_batch_tokens = std::min(max_batch_tokens, runner.max_tokens_per_step());
  options.context_length = context_length;
  options.drafter = drafter;
  options.draft_tokens = speculation.draft_tokens;
  options.speculation_max_batch = speculation.max_batch;
  KVJIT_ASSIGN_OR_RETURN(runtime::BatchScheduler scheduler,
                         runtime::BatchScheduler::Create(runner, options));
  KVJIT_ASSIGN_OR_RETURN(
      runtime::RequestId id,
      scheduler.Submit(prompt_ids, params, conditions.max_tokens.value_or(context_length),
                       conditions.stop_token_ids, num_samples, std::move(grammar)));
  while (!scheduler.Idle()) KVJIT_RETURN_IF_ERROR(scheduler.Step());
  KVJIT_ASSIGN_OR_RETURN(runtime::RequestResult result, scheduler.TakeResult(id));

  for (size_t i = 0; i < result.samples.size(); ++i) {
    const runtime::SampleResult& sample = result.samples[i];
    KVJIT_ASSIGN_OR_RETURN(std::string text, SequenceText(tokenizer, conditions, sample.tokens));
    std::printf("=== sample %zu of %zu: seed %llu, %zu tokens, %s ===\n%s\n", i + 1,
                result.samples.size(), static_cast<unsigned long long>(params.seed + i),
                sample.tokens.size(),
                std::string(runtime::FinishReasonName(sample.finish_reason)).c_str(),
                text.c_str());
  }
  std::fflush(stdout);

  if (stats) {
    const runtime::RequestMetrics& m = result.metrics;
    const kv::KvBlockCounters counters = scheduler.kv_blocks().counters();
    std::fprintf(stderr,
                 "prompt tokens %lld, %lld samples, generated %lld\nTTFT %.2f ms, TPOT %.2f ms\n"
                 "KV blocks peak %d of %lld (%d tokens each); %d shared at most; %lld copied on "
                 "write\n",
                 static_cast<long long>(m.prompt_tokens), static_cast<long long>(num_samples),
                 static_cast<long long>(m.generated_tokens), m.time_to_first_token_s * 1e3,
                 m.time_per_output_token_s * 1e3, m.peak_kv_blocks,
                 static_cast<long long>(runner.num_blocks()), scheduler.kv_blocks().block_size(),
                 counters.peak_blocks_shared, static_cast<long long>(counters.blocks_copied));
    if (speculation.enabled()) {
      std::fprintf(stderr, "%s\n",
                   SpeculationSummary(speculation.Name(), m.drafted_tokens, m.accepted_tokens,
                                      m.verify_steps)
                       .c_str());
    }
  }
  return absl::OkStatus();
}

}  // namespace kvjit::cli
