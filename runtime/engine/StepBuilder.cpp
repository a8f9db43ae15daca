#include "runtime/engine/StepBuilder.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "runtime/core/StatusMacros.h"

namespace kvjit::runtime {

absl::Status StepBuilder::AddSequence(kv::SequenceId sequence, absl::Span<const int32_t> tokens,
                                      int64_t first, bool wants_logits) {
  const kv::BlockTable* table = blocks_.FindSequence(sequence);
  if (table == nullptr) {
    return absl::NotFoundError(absl::StrCat("sequence ", sequence, " has no KV blocks"));
  }
  if (inputs_.seq_starts.empty()) inputs_.seq_starts.push_back(0);
  const int64_t count = static_cast<int64_t>(tokens.size());
  for (int64_t i = 0; i < count; ++i) {
    inputs_.tokens.push_back(tokens[i]);
    inputs_.positions.push_back(static_cast<int32_t>(first + i));
    KVJIT_ASSIGN_OR_RETURN(int32_t slot, blocks_.SlotFor(sequence, first + i));
    inputs_.slot_mapping.push_back(slot);
  }
  inputs_.seq_starts.push_back(static_cast<int32_t>(inputs_.tokens.size()));
  inputs_.context_lens.push_back(static_cast<int32_t>(first + count));
  if (wants_logits) inputs_.logits_rows.push_back(static_cast<int32_t>(inputs_.tokens.size() - 1));
  tables_.push_back(table);
  inputs_.max_blocks = std::max<int64_t>(inputs_.max_blocks, table->blocks.size());
  return absl::OkStatus();
}

StepInputs StepBuilder::Finish() && {
  // Rows past a sequence's context are never read, nor are blocks released
  // behind the attention window; 0 stands for both.
  inputs_.block_tables.assign(tables_.size() * inputs_.max_blocks, 0);
  for (size_t s = 0; s < tables_.size(); ++s) {
    std::replace_copy(tables_[s]->blocks.begin(), tables_[s]->blocks.end(),
                      inputs_.block_tables.begin() + s * inputs_.max_blocks, kv::kReleasedBlock, 0);
  }
  if (inputs_.logits_rows.empty() && !inputs_.tokens.empty()) {
    inputs_.logits_rows.push_back(static_cast<int32_t>(inputs_.tokens.size() - 1));
  }
  return std::move(inputs_);
}

absl::Status ReleaseBehindWindow(kv::KvBlockManager& blocks, kv::SequenceId sequence, int64_t window) {
  if (window <= 0) return absl::OkStatus();
  const kv::BlockTable* table = blocks.FindSequence(sequence);
  if (table == nullptr) {
    return absl::NotFoundError(absl::StrCat("sequence ", sequence, " has no KV blocks"));
  }
  // The next query sits at num_tokens and reads from num_tokens - window + 1.
  return blocks.ReleaseBlocksBefore(sequence, table->num_tokens - window + 1);
}

}  // namespace kvjit::runtime
