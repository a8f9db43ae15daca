#ifndef KVJIT_TESTS_UNIT_RUNTIME_ENGINE_FAKESTEPRUNNER_H_
#define KVJIT_TESTS_UNIT_RUNTIME_ENGINE_FAKESTEPRUNNER_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "runtime/exec/StepRunner.h"

namespace kvjit::testing {

// One sequence of a step the runner ran, as tests of a scheduler see it.
struct RecordedSequence {
  // Every token in the sequence's cache after the step, read through its
  // block table (-1 for a slot never written), so a test can tell whose
  // sequence it is by its prompt.
  std::vector<int32_t> context;
  // The step's tokens of this sequence: a prefill chunk, a recompute or a
  // decode token.
  int64_t new_tokens = 0;
};

// One Run call, sequences in step order.
struct RecordedStep {
  std::vector<RecordedSequence> sequences;
  int64_t tokens() const;
};

// A tiny random language model: the logits after `context` are a fixed
// pseudo-random function of every token in it (uniform in [-3, 3)).
std::vector<float> FakeLogits(absl::Span<const int32_t> context, int64_t vocab);

// Runs FakeLogits the way a compiled model runs: it sees only the step's
// inputs and its own paged cache, where each step's tokens are written at
// their slots and from which a sequence's earlier tokens are read through
// its block table. So a wrong block table, slot or missing copy-on-write
// copy gives other logits (or an error when it reads a slot never written).
class FakeStepRunner final : public runtime::StepRunner {
 public:
  FakeStepRunner(int64_t num_blocks, int64_t block_size, int64_t vocab, int64_t max_tokens_per_step)
      : num_blocks_(num_blocks),
        block_size_(block_size),
        vocab_(vocab),
        max_tokens_per_step_(max_tokens_per_step),
        cache_(num_blocks * block_size, kUnwritten) {}

  int64_t num_blocks() const override { return num_blocks_; }
  int64_t vocab_size() const override { return vocab_; }
  int64_t max_tokens_per_step() const override { return max_tokens_per_step_; }
  int64_t block_size() const override { return block_size_; }
  absl::Status CopyBlock(int64_t source, int64_t destination) override;
  absl::StatusOr<absl::Span<const float>> Run(const runtime::StepInputs& inputs) override;

  // A broken runtime, to show that the tests notice: copies are counted but
  // not made.
  void SkipCopies() { skip_copies_ = true; }
  int64_t steps() const { return steps_; }
  int64_t copies() const { return copies_; }

  // From now on, keeps what each successful Run saw; it changes no logits.
  void RecordSteps() { record_steps_ = true; }
  const std::vector<RecordedStep>& recorded_steps() const { return recorded_steps_; }

 private:
  static constexpr int32_t kUnwritten = -1;

  absl::StatusOr<int32_t> CachedToken(const runtime::StepInputs& inputs, int64_t sequence,
                                      int64_t position) const;
  RecordedStep Record(const runtime::StepInputs& inputs) const;

  int64_t num_blocks_;
  int64_t block_size_;
  int64_t vocab_;
  int64_t max_tokens_per_step_;
  std::vector<int32_t> cache_;
  std::vector<float> logits_;
  bool skip_copies_ = false;
  int64_t steps_ = 0;
  int64_t copies_ = 0;
  bool record_steps_ = false;
  std::vector<RecordedStep> recorded_steps_;
};

}  // namespace kvjit::testing

#endif  // KVJIT_TESTS_UNIT_RUNTIME_ENGINE_FAKESTEPRUNNER_H_
