#include "runtime/generation/Generator.h"

#include <algorithm>
#include <chrono>

#include "runtime/core/StatusMacros.h"
#include "runtime/generation/RequestValidation.h"
#include "runtime/generation/Speculation.h"
#include "runtime/generation/SpeculativeStep.h"
#include "runtime/generation/StepBuilder.h"

namespace kvjit::runtime {
namespace {

constexpr kv::SequenceId kSequence = 0;

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

absl::StatusOr<absl::Span<const float>> Generator::Step(kv::KvBlockManager& blocks,
                                                        const int32_t* tokens, int64_t position,
                                                        int64_t count, StepLogits logits,
                                                        grammar::GrammarMatcher* grammar) {
  KVJIT_RETURN_IF_ERROR(blocks.Reserve(kSequence, count));
  StepBuilder builder(blocks);
  KVJIT_RETURN_IF_ERROR(
      builder.AddSequence(kSequence, absl::MakeConstSpan(tokens, count), position, logits));
  const StepInputs inputs = std::move(builder).Finish();
  if (grammar == nullptr) return runner_.Run(inputs);
  // The next mask depends only on the tokens taken so far.
  if (mask_worker_ == nullptr) mask_worker_ = std::make_unique<BackgroundWorker>();
  mask_worker_->Start([grammar] { grammar->PrepareAllowedTokens(); });
  absl::StatusOr<absl::Span<const float>> rows = runner_.Run(inputs);
  mask_worker_->Wait();
  return rows;
}

absl::StatusOr<GenerationResult> Generator::Generate(const std::vector<int32_t>& prompt,
                                                     const sampling::SamplingParams& params,
                                                     int64_t max_new_tokens,
                                                     const std::function<bool(int32_t)>& on_token,
                                                     const std::function<void(absl::Span<const float>)>&
                                                         on_logits,
                                                     grammar::GrammarMatcher* grammar) {
  const int64_t prompt_tokens = static_cast<int64_t>(prompt.size());
  KVJIT_ASSIGN_OR_RETURN(max_new_tokens,
                         ValidateRequest("the request", prompt, max_new_tokens,
                                         {runner_.vocab_size(), context_length_}));
  KVJIT_ASSIGN_OR_RETURN(sampling::Sampler sampler, sampling::Sampler::Create(params));
  KVJIT_ASSIGN_OR_RETURN(kv::KvBlockManager blocks,
                         kv::KvBlockManager::Create(static_cast<int32_t>(runner_.num_blocks()),
                                                    static_cast<int32_t>(runner_.block_size())));

  GenerationResult result;
  GenerationMetrics& m = result.metrics;
  m.prompt_tokens = prompt_tokens;
  std::vector<int32_t> history = prompt;
  const auto start = std::chrono::steady_clock::now();
  absl::Span<const float> logits;
  for (int64_t done = 0; done < prompt_tokens;) {
    const int64_t count = std::min(runner_.max_tokens_per_step(), prompt_tokens - done);
    KVJIT_ASSIGN_OR_RETURN(logits,
                           Step(blocks, prompt.data() + done, done, count, StepLogits::kLast,
                                grammar));
    KVJIT_RETURN_IF_ERROR(ReleaseBehindWindow(blocks, kSequence, runner_.attention_window()));
    done += count;
  }
  const double prefill_s = SecondsSince(start);
  auto decode_start = std::chrono::steady_clock::now();
  // Takes one sampled token; false once generation is over.
  const auto take = [&](absl::Span<const float> row, int32_t next) -> absl::StatusOr<bool> {
    if (on_logits) on_logits(row);
    result.tokens.push_back(next);
    history.push_back(next);
    if (result.tokens.size() == 1) {
      m.time_to_first_token_s = SecondsSince(start);
      decode_start = std::chrono::steady_clock::now();
    }
    return on_token(next) && static_cast<int64_t>(result.tokens.size()) < max_new_tokens;
  };
  const int64_t vocab = runner_.vocab_size();
  DraftPolicy policy;
  const double draft_cost = drafter_ != nullptr ? drafter_->cost_per_token() : 0.0;
  const auto step_cost = [&](int64_t tokens) {
    return SampleStepCost(runner_, draft_cost, /*step_tokens=*/1, /*decodes=*/1, tokens);
  };
  KVJIT_ASSIGN_OR_RETURN(VerifiedDrafts verified,
                         TakeVerifiedTokens(logits, vocab, {}, sampler, history, grammar, take));
  while (verified.goes_on) {
    // The newest token is not in the cache yet; drafts follow it in the same
    // step, as many as the request and the context leave room for.
    const int64_t position = static_cast<int64_t>(history.size()) - 1;
    const int64_t room = policy.DraftLength(std::min({draft_tokens_,
                                   max_new_tokens - static_cast<int64_t>(result.tokens.size()) - 1,
                                   context_length_ - position - 1,
                                   runner_.max_tokens_per_step() - 1}),
                                            step_cost);
    std::vector<int32_t> step_tokens{history.back()};
    if (room > 0) {
      const DraftRequest request{kSequence, history, position, room};
      KVJIT_ASSIGN_OR_RETURN(std::vector<std::vector<int32_t>> drafts,
                             ProposeDrafts(*drafter_, absl::MakeConstSpan(&request, 1), blocks));
      step_tokens.insert(step_tokens.end(), drafts.front().begin(), drafts.front().end());
    }
    const int64_t drafted = static_cast<int64_t>(step_tokens.size()) - 1;
    KVJIT_ASSIGN_OR_RETURN(logits, Step(blocks, step_tokens.data(), position, drafted + 1,
                                        drafted > 0 ? StepLogits::kEvery : StepLogits::kLast,
                                        grammar));
    KVJIT_ASSIGN_OR_RETURN(verified,
                           TakeVerifiedTokens(logits, vocab, absl::MakeConstSpan(step_tokens).subspan(1),
                                              sampler, history, grammar, take));
    if (drafted > 0) {
      m.drafted_tokens += drafted;
      m.accepted_tokens += verified.accepted;
      ++m.verify_steps;
      policy.Record(drafted, verified.accepted);
      // The rejected drafts' keys and values go; the cache ends where the
      // newest token, not yet in it, starts.
      KVJIT_RETURN_IF_ERROR(blocks.Truncate(kSequence, position + 1 + verified.accepted));
    }
    KVJIT_RETURN_IF_ERROR(ReleaseBehindWindow(blocks, kSequence, runner_.attention_window()));
  }
  result.grammar_ended = verified.grammar_ended;
  const double decode_s = SecondsSince(decode_start);
  m.generated_tokens = static_cast<int64_t>(result.tokens.size());
  const int64_t decoded = m.generated_tokens - 1;
  m.time_per_output_token_s = decoded > 0 ? decode_s / decoded : 0;
  m.decode_tokens_per_s = decoded > 0 ? decoded / decode_s : 0;
  m.prefill_tokens_per_s = prefill_s > 0 ? prompt_tokens / prefill_s : 0;
  m.peak_kv_blocks = blocks.counters().peak_blocks_in_use;
  m.kv_blocks_released_by_window = blocks.counters().window_released_blocks;
  m.kv_blocks_total = blocks.num_blocks();
  KVJIT_RETURN_IF_ERROR(blocks.Free(kSequence));
  if (drafter_ != nullptr) KVJIT_RETURN_IF_ERROR(drafter_->Forget(kSequence));
  return result;
}

}  // namespace kvjit::runtime
