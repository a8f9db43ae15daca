#ifndef KVJIT_RUNTIME_GENERATION_DRAFTER_H_
#define KVJIT_RUNTIME_GENERATION_DRAFTER_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "runtime/kv/KvBlockManager.h"

namespace kvjit::runtime {

// One sequence asking for drafts before its next decode step.
struct DraftRequest {
  kv::SequenceId sequence = 0;
  // The sequence's tokens, prompt and generated: the drafts follow them.
  absl::Span<const int32_t> history;
  // Leading tokens of history whose keys and values the target's cache holds
  // (history.size() - 1 for a decode: the newest token is not in it yet).
  int64_t cached_tokens = 0;
  // The most tokens to propose (the draft length, cut by the request's and
  // the context's room); at least 1.
  int64_t max_tokens = 1;
};

// Speculative decoding's draft: proposes the tokens that may follow each
// sequence, for the target model to verify in its next step. The engines
// (Generator, BatchScheduler) ask for every speculating sequence of a step at
// once, so a draft model can batch them.
class Drafter {
 public:
  virtual ~Drafter() = default;

  // "ngram", "draft" or "layers": how --stats and the reports name it.
  virtual absl::string_view name() const = 0;

  // What proposing one token costs, in one-token steps of the target: the
  // engines weigh it with the verify step's cost (DraftPolicy). 0 for the
  // lookup.
  virtual double cost_per_token() const { return 0.0; }

  // drafts[i] follows requests[i].history, at most requests[i].max_tokens
  // long, and may be empty (nothing to propose). `target_cache` is the
  // target's KV manager, holding each request's sequence: a draft that
  // reads the target's cache (the layer-skipping self-draft) writes its
  // tokens' keys and values past request.cached_tokens and cuts the
  // sequence back to them before it returns, running the copies its
  // reservations queued; the others leave it alone. A draft model's failure
  // (a step refused) is an error.
  virtual absl::StatusOr<std::vector<std::vector<int32_t>>> Propose(
      absl::Span<const DraftRequest> requests, kv::KvBlockManager& target_cache) = 0;

  // The sequence will not ask again (finished, cancelled, preempted): the
  // drafter drops what it holds for it. Unknown sequences are no error.
  virtual absl::Status Forget(kv::SequenceId sequence) {
    (void)sequence;
    return absl::OkStatus();
  }
};

// Prompt lookup (NgramLookup.h): no model, no state.
class NgramDrafter final : public Drafter {
 public:
  NgramDrafter(int64_t min_ngram, int64_t max_ngram)
      : min_ngram_(min_ngram), max_ngram_(max_ngram) {}

  absl::string_view name() const override { return "ngram"; }
  absl::StatusOr<std::vector<std::vector<int32_t>>> Propose(
      absl::Span<const DraftRequest> requests, kv::KvBlockManager& target_cache) override;

 private:
  int64_t min_ngram_;
  int64_t max_ngram_;
};

}  // namespace kvjit::runtime

#endif  // KVJIT_RUNTIME_GENERATION_DRAFTER_H_
