#ifndef KVJIT_RUNTIME_EXEC_STEPINPUTS_H_
#define KVJIT_RUNTIME_EXEC_STEPINPUTS_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "runtime/exec/Executable.h"
#include "runtime/schema/StepContract.h"

namespace kvjit::runtime {

// One step's inputs, in the packed layout of the step contract
// (runtime/schema/StepContract.h): S sequences, T new tokens in all, L rows
// that produce logits. One array per kvx::StepInput, indexed by it; the
// named accessors are the same arrays.
struct StepInputs {
  using Values = std::vector<kvx::StepInputElement>;

  std::array<Values, kvx::kStepInputCount> values;
  // The block tables' columns: the one size of a step that no array's
  // length gives (StepContract.h, InputCounting).
  int64_t max_blocks = 0;

  Values& operator[](kvx::StepInput input) { return values[static_cast<size_t>(input)]; }
  const Values& operator[](kvx::StepInput input) const {
    return values[static_cast<size_t>(input)];
  }

  Values& tokens() { return (*this)[kvx::StepInput::Tokens]; }
  Values& positions() { return (*this)[kvx::StepInput::Positions]; }
  Values& seq_starts() { return (*this)[kvx::StepInput::SeqStarts]; }
  Values& context_lens() { return (*this)[kvx::StepInput::ContextLens]; }
  Values& slot_mapping() { return (*this)[kvx::StepInput::SlotMapping]; }
  Values& block_tables() { return (*this)[kvx::StepInput::BlockTables]; }
  Values& logits_rows() { return (*this)[kvx::StepInput::LogitsRows]; }
  const Values& tokens() const { return (*this)[kvx::StepInput::Tokens]; }
  const Values& positions() const { return (*this)[kvx::StepInput::Positions]; }
  const Values& seq_starts() const { return (*this)[kvx::StepInput::SeqStarts]; }
  const Values& context_lens() const { return (*this)[kvx::StepInput::ContextLens]; }
  const Values& slot_mapping() const { return (*this)[kvx::StepInput::SlotMapping]; }
  const Values& block_tables() const { return (*this)[kvx::StepInput::BlockTables]; }
  const Values& logits_rows() const { return (*this)[kvx::StepInput::LogitsRows]; }
};

// The sizes of the step `inputs` packs: T, L and S, the lengths of the
// inputs that count them, and the block-table columns.
StepSizes SizesOf(const StepInputs& inputs);

// The elements of `input` in a step of `sizes`: the product of its dims.
int64_t StepInputElements(kvx::StepInput input, const StepSizes& sizes);

// Whether every array of `inputs` has the elements its dims give at the
// step's sizes; the error names the first that does not.
absl::Status CheckStepInputSizes(const StepInputs& inputs);

}  // namespace kvjit::runtime

#endif  // KVJIT_RUNTIME_EXEC_STEPINPUTS_H_
