#include "runtime/exec/StepInputs.h"

#include "absl/strings/str_cat.h"

namespace kvjit::runtime {
namespace {

int64_t Count(const StepInputs& inputs, kvx::DimKind kind) {
  return static_cast<int64_t>(inputs[kvx::InputCounting(kind)].size());
}

}  // namespace

StepSizes SizesOf(const StepInputs& inputs) {
  return {Count(inputs, kvx::DimKind::Tokens), Count(inputs, kvx::DimKind::LogitsRows),
          Count(inputs, kvx::DimKind::Sequences), inputs.max_blocks};
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
    const size_t actual = inputs[spec.input].size();
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
