#ifndef KVJIT_RUNTIME_GENERATION_SPECULATION_H_
#define KVJIT_RUNTIME_GENERATION_SPECULATION_H_

#include <cstdint>

#include "absl/functional/function_ref.h"

namespace kvjit::runtime {

// Tokens a verify step gave on average: its accepted drafts and the model's
// own token after them (vLLM's mean acceptance length); 0 before any.
inline double MeanAcceptedLength(int64_t accepted_tokens, int64_t verify_steps) {
  return verify_steps > 0 ? 1.0 + static_cast<double>(accepted_tokens) / verify_steps : 0.0;
}

// How many tokens a sequence drafts each step, from what the target made of
// its drafts so far. The i-th draft token is kept with probability about a^i,
// where a, the chance that the target takes the next draft token, is
// estimated from the sequence's past drafts; a step verifying k drafts then
// gives 1 + a + ... + a^k tokens on average, for the time of a (k+1)-token
// step (StepRunner::decode_step_cost) and of drafting k tokens
// (Drafter::cost_per_token). The policy drafts the k that gives the most
// tokens per unit of time, and none where no k beats a plain step (never
// any where even drafts always taken would not). A sequence that does not
// draft rests, then tries a short draft where one is likely to pay; each
// try the target rejects doubles the next rest, up to kMaxRest steps, and
// one it takes whole makes the next rest one step. Greedy output does not
// depend on any of this; the decisions depend on nothing but the tokens, so
// a sampled run stays reproducible from its seed.
class DraftPolicy {
 public:
  static constexpr int64_t kMaxRest = 16;
  // Each outcome's weight in the estimate of a: from 1, one rejected draft
  // token leaves it at 0.75 and three at 0.42, where a CPU's verify steps
  // no longer pay (0.5 gave up too soon on the lookup's drafts of copied
  // text, where a line's last draft fails and the next line's are taken).
  static constexpr double kAcceptanceWeight = 0.25;
  // The chance a try after a rest is taken whole, as a try is judged: a
  // one-token try alone in a CPU step pays above 0.55; one that would open a
  // batch's next group of GEMM rows (cost 3.3 of the sample's share) does
  // not, so in a batch sequences try only beside another's drafts (at 4
  // open requests, tries that opened groups cost 13% of the throughput).
  static constexpr double kTryTaken = 0.6;

  // The draft tokens to ask for this step, at most `room`; 0: do not draft.
  // `step_cost(n)`: the time of this sequence's step if it feeds n tokens,
  // drafting them included, in units of its step of one token (alone in a
  // step: the target runner's StepRunner::decode_step_cost plus n - 1 times
  // the drafter's cost_per_token).
  int64_t DraftLength(int64_t room, absl::FunctionRef<double(int64_t)> step_cost) {
    trying_ = false;
    if (room <= 0 || !CouldEverPay(room, step_cost)) return 0;
    if (rest_ > 0) {
      --rest_;
      if (rest_ > 0) return 0;
      // A try is the shortest draft that pays if taken whole with
      // probability kTryTaken: one token alone in a step; in a batch, only
      // where another sample's drafts already pay for the rows it needs.
      for (int64_t length = 1; length <= room; ++length) {
        if (1.0 + kTryTaken * static_cast<double>(length) > step_cost(length + 1)) {
          trying_ = true;
          return length;
        }
      }
      rest_ = 1;
      return 0;
    }
    int64_t best_length = 0;
    double best_rate = 1.0;  // a plain step: one token per one-token step
    double expected_tokens = 1.0;
    double kept = 1.0;
    for (int64_t length = 1; length <= room; ++length) {
      kept *= acceptance_;
      expected_tokens += kept;
      const double rate = expected_tokens / step_cost(length + 1);
      if (rate > best_rate) {
        best_rate = rate;
        best_length = length;
      }
    }
    // Not worth drafting: this step and the next_rest_ - 1 after it rest,
    // then one tries a single token.
    if (best_length == 0) rest_ = next_rest_;
    return best_length;
  }

  // What the target kept of a step's `drafted` tokens: `accepted` of them,
  // then (if fewer) one it replaced. A step without drafts (the drafter had
  // none) tells nothing.
  void Record(int64_t drafted, int64_t accepted) {
    if (drafted == 0) return;
    for (int64_t i = 0; i < accepted; ++i) acceptance_ += kAcceptanceWeight * (1.0 - acceptance_);
    if (accepted < drafted) acceptance_ -= kAcceptanceWeight * acceptance_;
    if (trying_) {
      next_rest_ = accepted == drafted ? 1 : (next_rest_ * 2 < kMaxRest ? next_rest_ * 2 : kMaxRest);
    }
  }

 private:
  // Whether a draft the target always took would beat a plain step: drafts
  // that cost more than that are never asked for, not even tried.
  static bool CouldEverPay(int64_t room, absl::FunctionRef<double(int64_t)> step_cost) {
    for (int64_t length = 1; length <= room; ++length) {
      if (static_cast<double>(length + 1) > step_cost(length + 1)) return true;
    }
    return false;
  }

  // The estimate of a; a sequence starts out drafting.
  double acceptance_ = 1.0;
  int64_t rest_ = 0;
  int64_t next_rest_ = 1;
  // Whether the latest DraftLength was the draft tried after a rest.
  bool trying_ = false;
};

}  // namespace kvjit::runtime

#endif  // KVJIT_RUNTIME_GENERATION_SPECULATION_H_
