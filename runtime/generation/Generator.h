#ifndef KVJIT_RUNTIME_ENGINE_GENERATOR_H_
#define KVJIT_RUNTIME_ENGINE_GENERATOR_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/exec/StepRunner.h"
#include "runtime/generation/BackgroundWorker.h"
#include "runtime/generation/Drafter.h"
#include "runtime/generation/StepBuilder.h"
#include "runtime/grammar/GrammarMatcher.h"
#include "runtime/kv/KvBlockManager.h"
#include "runtime/sampling/Sampler.h"

namespace kvjit::runtime {

struct GenerationMetrics {
  int64_t prompt_tokens = 0;
  int64_t generated_tokens = 0;
  double time_to_first_token_s = 0;  // prefill and the first sampled token
  double time_per_output_token_s = 0;  // mean over the decode steps after the first
  double prefill_tokens_per_s = 0;
  double decode_tokens_per_s = 0;
  int32_t peak_kv_blocks = 0;
  int64_t kv_blocks_total = 0;
  // Blocks given back while the sliding attention window moved past them.
  int64_t kv_blocks_released_by_window = 0;
  // Speculative decoding: tokens drafted, drafted tokens the target model
  // agreed with, and the steps that verified drafts.
  int64_t drafted_tokens = 0;
  int64_t accepted_tokens = 0;
  int64_t verify_steps = 0;
};

struct GenerationResult {
  std::vector<int32_t> tokens;  // generated, without the prompt
  // The grammar was complete and allowed none of its stop tokens: generation
  // ended because no token could follow.
  bool grammar_ended = false;
  GenerationMetrics metrics;
};

// Generates for one request over a paged cache: the prompt in chunks of at
// most the program's tokens per step (chunked prefill), then one token per
// decode step, each sampled from the step's logits. With a drafter, each
// decode step also feeds up to `draft_tokens` drafted tokens and gives one or
// more tokens (Speculation.h).
class Generator {
 public:
  // `drafter` (not owned) may be null: no speculation.
  Generator(StepRunner& runner, int64_t context_length, Drafter* drafter = nullptr,
            int64_t draft_tokens = 0)
      : runner_(runner),
        context_length_(context_length),
        drafter_(drafter),
        draft_tokens_(drafter != nullptr ? draft_tokens : 0) {}

  // `on_token` sees each new token as soon as it is sampled and returns
  // whether to go on (false once a stop condition holds); `on_logits`, where
  // given, the logits each token is sampled from. With a `grammar` (not
  // owned; may be null), each token is drawn from those it allows, which
  // it computes while the step before runs. A prompt that does
  // not fit the context with room for one more token, or a cache too small
  // for the request, is an error naming the sizes.
  absl::StatusOr<GenerationResult> Generate(const std::vector<int32_t>& prompt,
                                            const sampling::SamplingParams& params,
                                            int64_t max_new_tokens,
                                            const std::function<bool(int32_t)>& on_token,
                                            const std::function<void(absl::Span<const float>)>&
                                                on_logits = nullptr,
                                            grammar::GrammarMatcher* grammar = nullptr);

 private:
  // Runs one step over `count` new tokens of the request, the first at
  // `position`; returns the logits `logits` asks for, row after row.
  absl::StatusOr<absl::Span<const float>> Step(kv::KvBlockManager& blocks, const int32_t* tokens,
                                               int64_t position, int64_t count, StepLogits logits,
                                               grammar::GrammarMatcher* grammar);

  StepRunner& runner_;
  int64_t context_length_;
  Drafter* drafter_;
  int64_t draft_tokens_;
  // Computes the grammar's next mask beside each step; started at the first.
  std::unique_ptr<BackgroundWorker> mask_worker_;
};

}  // namespace kvjit::runtime

#endif  // KVJIT_RUNTIME_ENGINE_GENERATOR_H_
