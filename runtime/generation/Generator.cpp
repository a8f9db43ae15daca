#include "runtime/generation/Generator.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "runtime/core/StatusMacros.h"
#include "runtime/generation/RequestValidation.h"
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
                                                        int64_t count) {
  KVJIT_RETURN_IF_ERROR(blocks.Reserve(kSequence, count));
  StepBuilder builder(blocks);
  KVJIT_RETURN_IF_ERROR(builder.AddSequence(kSequence, absl::MakeConstSpan(tokens, count), position,
                                            /*wants_logits=*/true));
  const StepInputs inputs = std::move(builder).Finish();
  KVJIT_ASSIGN_OR_RETURN(absl::Span<const float> logits, runner_.Run(inputs));
  KVJIT_RETURN_IF_ERROR(ReleaseBehindWindow(blocks, kSequence, runner_.attention_window()));
  return logits;
}

absl::StatusOr<GenerationResult> Generator::Generate(const std::vector<int32_t>& prompt,
                                                     const sampling::SamplingParams& params,
                                                     int64_t max_new_tokens,
                                                     const std::function<bool(int32_t)>& on_token,
                                                     const std::function<void(absl::Span<const float>)>&
                                                         on_logits) {
  const int64_t prompt_tokens = static_cast<int64_t>(prompt.size());
  KVJIT_ASSIGN_OR_RETURN(max_new_tokens,
                         ValidateRequest("the request", prompt, max_new_tokens,
                                         {runner_.vocab_size(), context_length_}));
  KVJIT_ASSIGN_OR_RETURN(sampling::Sampler sampler, sampling::Sampler::Create(params));
  KVJIT_ASSIGN_OR_RETURN(kv::KvBlockManager blocks,
                         kv::KvBlockManager::Create(static_cast<int32_t>(runner_.num_blocks()),
                                                    static_cast<int32_t>(runner_.block_size())));

  GenerationResult result;
  result.metrics.prompt_tokens = prompt_tokens;
  std::vector<int32_t> history = prompt;
  const auto start = std::chrono::steady_clock::now();
  absl::Span<const float> logits;
  for (int64_t done = 0; done < prompt_tokens;) {
    const int64_t count = std::min(runner_.max_tokens_per_step(), prompt_tokens - done);
    KVJIT_ASSIGN_OR_RETURN(logits, Step(blocks, prompt.data() + done, done, count));
    done += count;
  }
  const double prefill_s = SecondsSince(start);
  auto decode_start = std::chrono::steady_clock::now();
  for (int64_t step = 0; step < max_new_tokens; ++step) {
    if (on_logits) on_logits(logits);
    const int32_t next = sampler.Sample(logits, history);
    result.tokens.push_back(next);
    history.push_back(next);
    if (step == 0) {
      result.metrics.time_to_first_token_s = SecondsSince(start);
      decode_start = std::chrono::steady_clock::now();
    }
    if (!on_token(next) || step + 1 == max_new_tokens) break;
    KVJIT_ASSIGN_OR_RETURN(
        logits, Step(blocks, &history.back(), static_cast<int64_t>(history.size()) - 1, 1));
  }
  const double decode_s = SecondsSince(decode_start);
  GenerationMetrics& m = result.metrics;
  m.generated_tokens = static_cast<int64_t>(result.tokens.size());
  const int64_t decode_steps = m.generated_tokens - 1;
  m.time_per_output_token_s = decode_steps > 0 ? decode_s / decode_steps : 0;
  m.decode_tokens_per_s = decode_steps > 0 ? decode_steps / decode_s : 0;
  m.prefill_tokens_per_s = prefill_s > 0 ? prompt_tokens / prefill_s : 0;
  m.peak_kv_blocks = blocks.counters().peak_blocks_in_use;
  m.kv_blocks_released_by_window = blocks.counters().window_released_blocks;
  m.kv_blocks_total = blocks.num_blocks();
  KVJIT_RETURN_IF_ERROR(blocks.Free(kSequence));
  return result;
}

}  // namespace kvjit::runtime
