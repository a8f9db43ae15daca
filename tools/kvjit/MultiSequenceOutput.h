#ifndef KVJIT_TOOLS_KVJIT_MULTISEQUENCEOUTPUT_H_
#define KVJIT_TOOLS_KVJIT_MULTISEQUENCEOUTPUT_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "runtime/tokenizer/Tokenizer.h"
#include "runtime/generation/BeamSearch.h"
#include "runtime/grammar/GrammarCompiler.h"
#include "runtime/exec/StepRunner.h"
#include "runtime/sampling/Sampler.h"
#include "runtime/sampling/StopChecker.h"
#include "tools/kvjit/SpeculationFlags.h"

// The `kvjit run` modes that generate several sequences for one prompt and
// print them once all are done: beam search (--beams) and parallel samples
// (--samples). Stop strings cut each sequence's printed text; they do not
// steer the search or the sampling.
namespace kvjit::cli {

// Prints the best hypotheses (with a header line each when more than one is
// asked for); `stats` writes the KV blocks used, shared and copied to stderr.
absl::Status PrintBeamSearch(runtime::StepRunner& runner, int64_t context_length,
                             const tokenizer::Tokenizer& tokenizer,
                             const std::vector<int32_t>& prompt_ids,
                             const runtime::BeamSearchParams& params,
                             const sampling::StopConditions& conditions, bool stats);

// Draws `num_samples` continuations through the batch scheduler: the prompt
// is prefilled once and its blocks shared by every sample, which then decode
// together, sample i with seed params.seed + i, each speculating with
// `drafter` (may be null) as `speculation` says, each sample drawn from what
// `grammar` (may be null) allows. Prints each with a header
// line; `stats` writes TTFT, TPOT, the KV blocks and the drafts to stderr.
absl::Status PrintParallelSamples(runtime::StepRunner& runner, int64_t context_length,
                                  const tokenizer::Tokenizer& tokenizer,
                                  const std::vector<int32_t>& prompt_ids,
                                  const sampling::SamplingParams& params, int64_t num_samples,
                                  int64_t max_batch_tokens,
                                  const sampling::StopConditions& conditions, bool stats,
                                  const SpeculationChoice& speculation, runtime::Drafter* drafter,
                                  std::shared_ptr<const grammar::CompiledGrammar> grammar);

}  // namespace kvjit::cli

#endif  // KVJIT_TOOLS_KVJIT_MULTISEQUENCEOUTPUT_H_
