#ifndef KVJIT_RUNTIME_ENGINE_BEAMSEARCH_H_
#define KVJIT_RUNTIME_ENGINE_BEAMSEARCH_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "runtime/exec/StepRunner.h"
#include "runtime/grammar/GrammarCompiler.h"
#include "runtime/grammar/GrammarMatcher.h"
#include "runtime/kv/KvBlockManager.h"
#include "runtime/sampling/StopChecker.h"

namespace kvjit::runtime {

// When beam search ends before the length limit: Hugging Face transformers'
// `early_stopping` = True, False and "never".
enum class EarlyStopping {
  // True: as soon as there are num_beams finished hypotheses.
  kWhenBeamsFinished,
  // False (HF's default): once num_beams hypotheses are finished and the best
  // live beam, scored at its current length, cannot beat the worst of them.
  // A heuristic: with a positive length penalty a longer beam might still.
  kHeuristic,
  // "never": once no live beam can beat the worst finished hypothesis at any
  // length it may still reach (the canonical, exact bound).
  kNever,
};

// "true", "false" or "never", as in HF's `early_stopping`; an InvalidArgument
// error for anything else.
absl::StatusOr<EarlyStopping> ParseEarlyStopping(absl::string_view text);

struct BeamSearchParams {
  // Names the request in error messages.
  std::string request_id = "beam search";
  int32_t num_beams = 1;
  // The best this many hypotheses are returned; at most num_beams.
  int32_t num_return_sequences = 1;
  // A hypothesis' score is sum_logprobs / generated_length^length_penalty,
  // where generated_length counts the new tokens, the end-of-sequence token
  // included, and not the prompt (HF's decoder-only convention). Above 0
  // favours longer hypotheses, below 0 shorter ones.
  double length_penalty = 1.0;
  EarlyStopping early_stopping = EarlyStopping::kHeuristic;
  // The most new tokens per hypothesis (fewer where the context ends first).
  int64_t max_new_tokens = 32;
  // Tokens that finish a hypothesis (end of sequence / of turn).
  std::vector<int32_t> eos_token_ids;
  // Where given, every hypothesis is one the grammar allows: a beam's
  // continuations are only the tokens its matcher allows (scored by their
  // log-probabilities under the whole vocabulary, as Hugging Face's logits
  // processors leave them), and once the grammar is complete only the
  // end-of-sequence tokens, which it then needs.
  std::shared_ptr<const grammar::CompiledGrammar> grammar;
};

struct BeamHypothesis {
  // The generated tokens, without the prompt; they end with the
  // end-of-sequence token when finish_reason is kEos.
  std::vector<int32_t> tokens;
  double sum_logprobs = 0;
  double score = 0;
  sampling::StopReason finish_reason = sampling::StopReason::kNone;
};

// KV memory of one search, in blocks of the runner's block size.
struct BeamSearchStats {
  int64_t prompt_tokens = 0;
  // Decode steps after the prefill (each runs every live beam once).
  int64_t decode_steps = 0;
  // Most blocks the search held at once.
  int32_t peak_kv_blocks = 0;
  // What the live beams' block tables added up to at that moment: the blocks
  // one private cache per beam would have needed.
  int32_t peak_kv_blocks_unshared = 0;
  // Most blocks held by more than one beam at once.
  int32_t peak_blocks_shared = 0;
  // Copy-on-write copies of shared, partly filled blocks.
  int64_t blocks_copied = 0;
};

struct BeamSearchResult {
  // Best first: by score, then by the order in which they finished.
  std::vector<BeamHypothesis> hypotheses;
  BeamSearchStats stats;
};

// Beam search of one prompt over a paged KV cache, with the semantics of
// Hugging Face transformers' beam search (num_beams, length_penalty,
// early_stopping, num_return_sequences):
//
// The prompt is prefilled once, as one KV sequence. Every step scores each
// live beam's continuations by cumulative log-probability (sum of
// log_softmax of the logits, in double) and takes the best
// max(2, 1 + number of EOS ids) × num_beams candidates over all beams and
// tokens. An EOS candidate among the first num_beams of them finishes its
// hypothesis; the best non-EOS candidates become the next num_beams live
// beams. At most num_beams finished hypotheses are kept (a new one displaces
// the worst only when strictly better; of tied worst ones, the earliest
// finished, as HF does). Live beams that reach the length
// limit finish with reason kLength.
//
// Candidates are ordered by cumulative log-probability, ties going to the
// better-ranked parent beam and then to the lower token id; so one beam
// equals greedy decoding exactly (the argmax, lowest id on ties) unless
// early_stopping is kNever with a positive length penalty, where one beam
// keeps searching past a finished hypothesis for a longer, better one.
//
// The search starts from one beam (the prompt) rather than HF's copies of it
// at -1e9: with num_beams above what the vocabulary allows, there are fewer
// live beams at first, and fewer than num_return_sequences hypotheses when
// fewer exist.
//
// Each live beam is a KV sequence. Beams that continue the same parent fork
// it, sharing all its blocks; the first write into a shared, partly filled
// block copies it (the copy runs on the runner before the step), so K beams
// cost the shared prefix once plus their own tails.
class BeamSearch {
 public:
  // Keeps the block bookkeeping of the runner's whole pool itself.
  BeamSearch(StepRunner& runner, int64_t context_length)
      : runner_(runner), context_length_(context_length) {}
  // Keeps it in `blocks`, which must describe the runner's pool and may hold
  // other sequences; the search uses unused sequence ids and frees its own.
  BeamSearch(StepRunner& runner, kv::KvBlockManager& blocks, int64_t context_length)
      : runner_(runner), shared_blocks_(&blocks), context_length_(context_length) {}

  // `keep_going`, where given, is called each time the beams have grown by a
  // token, with the number of tokens each now has, before the step that
  // extends them further; returning false cancels the search with a
  // Cancelled error. Every block the search took is free again when this
  // returns, whatever the outcome. Invalid parameters, a prompt that leaves
  // no room in the context, or a pool too small for num_beams beams are
  // errors naming the request and the sizes.
  absl::StatusOr<BeamSearchResult> Search(const std::vector<int32_t>& prompt,
                                          const BeamSearchParams& params,
                                          const std::function<bool(int64_t)>& keep_going = nullptr);

 private:
  StepRunner& runner_;
  kv::KvBlockManager* shared_blocks_ = nullptr;
  int64_t context_length_;
};

}  // namespace kvjit::runtime

#endif  // KVJIT_RUNTIME_ENGINE_BEAMSEARCH_H_
