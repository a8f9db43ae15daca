#ifndef KVJIT_RUNTIME_EXEC_STEPINPUTS_H_
#define KVJIT_RUNTIME_EXEC_STEPINPUTS_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "runtime/exec/Executable.h"
#include "runtime/schema/StepContract.h"

namespace kvjit::runtime {

// One step's inputs, in the packed layout of the step contract
// (runtime/schema/StepContract.h): S sequences, T new tokens in all, L rows
// that produce logits.
struct StepInputs {
  std::vector<int32_t> tokens;        // [T]
  std::vector<int32_t> positions;     // [T]
  std::vector<int32_t> seq_starts;    // [S + 1]
  std::vector<int32_t> context_lens;  // [S]
  std::vector<int32_t> slot_mapping;  // [T]
  std::vector<int32_t> block_tables;  // [S, max_blocks], row-major
  int64_t max_blocks = 0;
  std::vector<int32_t> logits_rows;   // [L]
};

// The array of `inputs` that kvx::StepInput `input` names.
absl::Span<const int32_t> StepInputValues(const StepInputs& inputs, kvx::StepInput input);

// The sizes of the step `inputs` packs: T, L, S and the block-table columns.
StepSizes SizesOf(const StepInputs& inputs);

// The elements of `input` in a step of `sizes`: the product of its dims.
int64_t StepInputElements(kvx::StepInput input, const StepSizes& sizes);

// Whether every array of `inputs` has the elements its dims give at the
// step's sizes; the error names the first that does not.
absl::Status CheckStepInputSizes(const StepInputs& inputs);

}  // namespace kvjit::runtime

#endif  // KVJIT_RUNTIME_EXEC_STEPINPUTS_H_
