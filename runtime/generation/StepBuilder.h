#ifndef KVJIT_RUNTIME_ENGINE_STEPBUILDER_H_
#define KVJIT_RUNTIME_ENGINE_STEPBUILDER_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "runtime/exec/StepRunner.h"
#include "runtime/kv/KvBlockManager.h"

namespace kvjit::runtime {

// Which of a sequence's new tokens a step computes logits for.
enum class StepLogits {
  kNone,
  kLast,   // the distribution of the token after them
  kEvery,  // one row per token, in order (speculative decoding's verification)
};

// Packs sequences' new tokens into one step's inputs, in the step contract's
// layout, from the slots and block tables the KV manager holds for them.
class StepBuilder {
 public:
  explicit StepBuilder(const kv::KvBlockManager& blocks) : blocks_(blocks) {}

  // Adds `tokens`, the sequence's tokens from position `first` on, whose
  // slots must be reserved, with the logits rows `logits` asks for.
  absl::Status AddSequence(kv::SequenceId sequence, absl::Span<const int32_t> tokens,
                           int64_t first, StepLogits logits);

  // The step, block tables padded to the longest; a step where no sequence
  // wants logits asks for the last token's row (the runner computes at least
  // one), which the caller ignores.
  StepInputs Finish() &&;

 private:
  const kv::KvBlockManager& blocks_;
  StepInputs inputs_;
  std::vector<const kv::BlockTable*> tables_;
};

// After a step of `sequence`: gives back its blocks that no query from its
// next position on reads, every layer attending over at most the last
// `window` positions (StepRunner::attention_window; 0 releases nothing).
absl::Status ReleaseBehindWindow(kv::KvBlockManager& blocks, kv::SequenceId sequence, int64_t window);

}  // namespace kvjit::runtime

#endif  // KVJIT_RUNTIME_ENGINE_STEPBUILDER_H_
