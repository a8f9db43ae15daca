#ifndef KVJIT_RUNTIME_GENERATION_SPECULATIVESTEP_H_
#define KVJIT_RUNTIME_GENERATION_SPECULATIVESTEP_H_

#include <cstdint>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "runtime/exec/StepRunner.h"
#include "runtime/generation/Drafter.h"
#include "runtime/grammar/GrammarMatcher.h"
#include "runtime/kv/KvBlockManager.h"
#include "runtime/sampling/Sampler.h"

// What both engines (Generator, BatchScheduler) do around a decode step that
// may verify drafts, so that they take drafts by the same rules.
namespace kvjit::runtime {

// drafter.Propose(requests, target_cache), checked: one draft per request,
// none longer than its max_tokens (an Internal error naming the drafter).
absl::StatusOr<std::vector<std::vector<int32_t>>> ProposeDrafts(
    Drafter& drafter, absl::Span<const DraftRequest> requests, kv::KvBlockManager& target_cache);

// DraftPolicy::DraftLength's step cost for a sample among `decodes` decoding
// samples in a step of `step_tokens` decode tokens (its drafts included so
// far): the time of its part of the step if it feeds `tokens` tokens, in
// units of its part with one token. Its part is the step's
// StepRunner::decode_step_cost over the decodes; its drafts add what they
// grow the step by and what drafting them costs (`draft_cost` of a one-token
// step each, Drafter::cost_per_token, of such a part, since the drafter
// batches alike). Alone in a step (1 and 1): decode_step_cost(tokens) plus
// `draft_cost` for each draft.
double SampleStepCost(const StepRunner& runner, double draft_cost, int64_t step_tokens,
                      int64_t decodes, int64_t tokens);

// What a sequence took from one decode step.
struct VerifiedDrafts {
  // Drafts the model agreed with, in order from the first.
  int64_t accepted = 0;
  // False once `take` said the sequence is done, or its grammar allows no
  // token.
  bool goes_on = true;
  // The sequence's grammar allows no token next (it is complete and allows
  // none of its stop tokens): the sequence ends without a new token.
  bool grammar_ended = false;
};

// Sees one token of a decode step, drawn from `row` (the step's logits for
// it), and appends it to the history the sampler's penalties read; returns
// whether the sequence goes on. Once it returns false nothing it was given
// (the history, the sampler) is read again: the sequence may be gone.
using TakeToken = absl::FunctionRef<absl::StatusOr<bool>(absl::Span<const float> row, int32_t token)>;

// Draws a decode step's tokens for one sequence that fed its newest token
// and then `drafts`: `rows` holds drafts.size() + 1 rows of `vocab` logits,
// row j the model's distribution after the newest token and drafts 0..j-1.
// Row j's token keeps draft j where the two agree (greedy: the model's pick
// equals it; sampled: Sampler::SampleAgainstDraft's rejection sampling) and
// otherwise replaces it and ends the step; the last row's token follows the
// last draft when all are kept. `history` is the sequence's tokens, which
// `take` extends; each token goes to `take` as soon as it is drawn. With a
// `grammar` (may be null), each row is drawn from the tokens it allows next
// (a draft it does not allow is rejected) and each drawn token moves it on.
absl::StatusOr<VerifiedDrafts> TakeVerifiedTokens(absl::Span<const float> rows, int64_t vocab,
                                                  absl::Span<const int32_t> drafts,
                                                  sampling::Sampler& sampler,
                                                  const std::vector<int32_t>& history,
                                                  grammar::GrammarMatcher* grammar,
                                                  TakeToken take);

}  // namespace kvjit::runtime

#endif  // KVJIT_RUNTIME_GENERATION_SPECULATIVESTEP_H_
