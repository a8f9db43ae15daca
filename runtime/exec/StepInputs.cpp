#include "runtime/exec/StepInputs.h"

#include "absl/strings/str_cat.h"

namespace kvjit::runtime {

absl::Span<const int32_t> StepInputValues(const StepInputs& inputs, kvx::StepInput input) {
  switch (input) {
    case kvx::StepInput::Tokens:
      return inputs.tokens;
    case kvx::StepInput::Positions:
      return inputs.positions;
    case kvx::StepInput::SeqStarts:
      return inputs.seq_starts;
    case kvx::StepInput::ContextLens:
      return inputs.context_lens;
    case kvx::StepInput::SlotMapping:
      return inputs.slot_mapping;
    case kvx::StepInput::BlockTables:
      return inputs.block_tables;
    case kvx::StepInput::LogitsRows:
      return inputs.logits_rows;
  }
  return {};
}

StepSizes SizesOf(const StepInputs& inputs) {
  return {static_cast<int64_t>(inputs.tokens.size()), static_cast<int64_t>(inputs.logits_rows.size()),
          static_cast<int64_t>(inputs.context_lens.size()), inputs.max_blocks};
}

int64_t StepInputElements(kvx::StepInput input, const StepSizes& sizes) {
  const kvx::StepInputSpec& spec = kvx::SpecOf(input);
  int64_t elements = 1;
  for (int d = 0; d < spec.rank; ++d) elements *= DimExtent(spec.dims[d], 0, sizes);
  return elements;
}

absl::Status CheckStepInputSizes(const StepInputs& inputs) {
  const StepSizes sizes = SizesOf(inputs);
  for (const kvx::StepInputSpec& spec : kvx::kStepInputs) {
    const int64_t expected = StepInputElements(spec.input, sizes);
    const size_t actual = StepInputValues(inputs, spec.input).size();
    if (static_cast<int64_t>(actual) != expected) {
      return absl::InvalidArgumentError(absl::StrCat(
          "step inputs disagree in size: ", spec.name, " has ", actual, " values, not the ",
          expected, " of a step of ", sizes.tokens, " tokens, ", sizes.sequences,
          " sequences of ", sizes.max_blocks, " blocks each and ", sizes.logits_rows,
          " logits rows"));
    }
  }
  return absl::OkStatus();
}

}  // namespace kvjit::runtime
