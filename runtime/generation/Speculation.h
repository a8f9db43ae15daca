#ifndef KVJIT_RUNTIME_GENERATION_SPECULATION_H_
#define KVJIT_RUNTIME_GENERATION_SPECULATION_H_

#include <cstdint>

namespace kvjit::runtime {

// How much to speculate: each decode step also feeds up to `draft_tokens`
// tokens a Drafter (Drafter.h) proposes, and the target model's own choice
// at each of them decides how many are kept. Greedy output is token for
// token that of decoding without drafts; sampled output is verified by
// rejection sampling (Sampler::SampleAgainstDraft), so its distribution is
// the model's, though a seed gives other text than it does without drafts.
struct SpeculativeDecoding {
  // 0 turns speculation off.
  int64_t draft_tokens = 0;
  // The n-gram lookup's suffix lengths (NgramLookup.h).
  int64_t min_ngram = 2;
  int64_t max_ngram = 3;
};

// Tokens a verify step gave on average: its accepted drafts and the model's
// own token after them (vLLM's mean acceptance length); 0 before any.
inline double MeanAcceptedLength(int64_t accepted_tokens, int64_t verify_steps) {
  return verify_steps > 0 ? 1.0 + static_cast<double>(accepted_tokens) / verify_steps : 0.0;
}

// A verify step costs more than a one-token step (on a CPU nearly in
// proportion to its tokens), and a draft model's steps cost time of their
// own, so after drafts the target rejected outright a sequence rests from
// drafting for a number of steps that doubles with each such failure in a
// row, up to kMaxRest; a draft it takes ends the rest.
class DraftBackoff {
 public:
  static constexpr int64_t kMaxRest = 16;

  // Whether this step drafts; a resting sequence counts one step down.
  bool ShouldDraft() {
    if (rest_ == 0) return true;
    --rest_;
    return false;
  }

  // What the target kept of a step's `drafted` tokens.
  void Record(int64_t drafted, int64_t accepted) {
    if (drafted == 0) return;
    if (accepted > 0) {
      next_rest_ = 1;
      return;
    }
    rest_ = next_rest_;
    next_rest_ = next_rest_ * 2 < kMaxRest ? next_rest_ * 2 : kMaxRest;
  }

 private:
  int64_t rest_ = 0;
  int64_t next_rest_ = 1;
};

}  // namespace kvjit::runtime

#endif  // KVJIT_RUNTIME_GENERATION_SPECULATION_H_
