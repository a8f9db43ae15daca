#include "runtime/generation/StepBuilder.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "runtime/core/StatusMacros.h"

namespace kvjit::runtime {

absl::Status StepBuilder::AddSequence(kv::SequenceId sequence, absl::Span<const int32_t> tokens,
                                      int64_t first, StepLogits logits) {
  const kv::BlockTable* table = blocks_.FindSequence(sequence);
  if (table == nullptr) {
    return absl::NotFoundError(absl::StrCat("sequence ", sequence, " has no KV blocks"));
  }
  using kvx::StepInput;
  StepInputs::Values& step_tokens = inputs_[StepInput::Tokens];
  StepInputs::Values& seq_starts = inputs_[StepInput::SeqStarts];
  if (seq_starts.empty()) seq_starts.push_back(0);
  const int64_t count = static_cast<int64_t>(tokens.size());
  for (int64_t i = 0; i < count; ++i) {
    step_tokens.push_back(tokens[i]);
    inputs_[StepInput::Positions].push_back(static_cast<int32_t>(first + i));
    KVJIT_ASSIGN_OR_RETURN(int32_t slot, blocks_.SlotFor(sequence, first + i));
    inputs_[StepInput::SlotMapping].push_back(slot);
  }
  const int32_t last_row = static_cast<int32_t>(step_tokens.size() - 1);
  seq_starts.push_back(last_row + 1);
  inputs_[StepInput::ContextLens].push_back(static_cast<int32_t>(first + count));
  if (logits == StepLogits::kEvery) {
    for (int32_t row = last_row + 1 - static_cast<int32_t>(count); row <= last_row; ++row) {
      inputs_[StepInput::LogitsRows].push_back(row);
    }
  } else if (logits == StepLogits::kLast) {
    inputs_[StepInput::LogitsRows].push_back(last_row);
  }
  tables_.push_back(table);
  inputs_.max_blocks = std::max<int64_t>(inputs_.max_blocks, table->blocks.size());
  return absl::OkStatus();
}

StepInputs StepBuilder::Finish() && {
  // Rows past a sequence's context are never read, nor are blocks released
  // behind the attention window; 0 stands for both.
  StepInputs::Values& block_tables = inputs_[kvx::StepInput::BlockTables];
  block_tables.assign(tables_.size() * inputs_.max_blocks, 0);
  for (size_t s = 0; s < tables_.size(); ++s) {
    std::replace_copy(tables_[s]->blocks.begin(), tables_[s]->blocks.end(),
                      block_tables.begin() + s * inputs_.max_blocks, kv::kReleasedBlock, 0);
  }
  const StepInputs::Values& tokens = inputs_[kvx::StepInput::Tokens];
  StepInputs::Values& logits_rows = inputs_[kvx::StepInput::LogitsRows];
  if (logits_rows.empty() && !tokens.empty()) {
    logits_rows.push_back(static_cast<int32_t>(tokens.size() - 1));
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
