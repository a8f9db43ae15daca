#include "runtime/exec/StepValidation.h"

#include "absl/strings/str_cat.h"

namespace kvjit::runtime {

absl::Status ValidateStep(const StepInputs& inputs, const StepLimits& limits) {
  const StepSizes sizes = SizesOf(inputs);
  const int64_t tokens = sizes.tokens, sequences = sizes.sequences, rows = sizes.logits_rows;
  if (tokens == 0 || tokens > limits.max_tokens) {
    return absl::InvalidArgumentError(
        absl::StrCat("a step carries 1 to ", limits.max_tokens, " tokens, got ", tokens));
  }
  if (sequences == 0 || sequences > tokens || inputs.max_blocks < 0 ||
      inputs.max_blocks > limits.max_columns) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a step of ", tokens, " tokens has 1 to ", tokens, " sequences of at most ",
        limits.max_columns, " blocks each, got ", sequences, " of ", inputs.max_blocks));
  }
  if (absl::Status agree = CheckStepInputSizes(inputs); !agree.ok()) return agree;
  if (rows < 1 || rows > tokens) {
    return absl::InvalidArgumentError(
        absl::StrCat("a step asks for 1 to ", tokens, " logits rows, got ", rows));
  }
  for (int32_t row : inputs.logits_rows()) {
    if (row < 0 || row >= tokens) {
      return absl::OutOfRangeError(
          absl::StrCat("logits row ", row, " is not one of the step's ", tokens, " tokens"));
    }
  }
  for (int64_t t = 0; t < tokens; ++t) {
    if (inputs.tokens()[t] < 0 || inputs.tokens()[t] >= limits.vocab_size) {
      return absl::OutOfRangeError(absl::StrCat("token ", t, " is id ", inputs.tokens()[t],
                                                ", outside the vocabulary of ", limits.vocab_size));
    }
  }
  const int64_t slots = limits.num_blocks * limits.block_size;
  for (int64_t t = 0; t < tokens; ++t) {
    if (inputs.slot_mapping()[t] < 0 || inputs.slot_mapping()[t] >= slots) {
      return absl::OutOfRangeError(absl::StrCat("token ", t, " maps to KV slot ",
                                                inputs.slot_mapping()[t], ", outside the pool's ",
                                                slots, " slots"));
    }
  }
  if (inputs.seq_starts()[0] != 0 || inputs.seq_starts()[sequences] != tokens) {
    return absl::InvalidArgumentError(absl::StrCat("seq_starts must run from 0 to ", tokens,
                                                   ", got ", inputs.seq_starts()[0], " .. ",
                                                   inputs.seq_starts()[sequences]));
  }
  const int64_t capacity = inputs.max_blocks * limits.block_size;
  for (int64_t s = 0; s < sequences; ++s) {
    const int32_t begin = inputs.seq_starts()[s];
    const int32_t end = inputs.seq_starts()[s + 1];
    if (end < begin || end > tokens) {
      return absl::InvalidArgumentError(absl::StrCat("seq_starts leaves 0..", tokens,
                                                     " or decreases at sequence ", s, " (", begin,
                                                     " -> ", end, ")"));
    }
    const int64_t context = inputs.context_lens()[s];
    if (context < end - begin || context > capacity) {
      return absl::OutOfRangeError(absl::StrCat("sequence ", s, " has context length ", context,
                                                ", outside ", end - begin, "..", capacity, " (its ",
                                                end - begin, " new tokens; ", inputs.max_blocks,
                                                " blocks of ", limits.block_size, ")"));
    }
    const int32_t* table = inputs.block_tables().data() + s * inputs.max_blocks;
    for (int64_t i = 0; i * limits.block_size < context; ++i) {
      if (table[i] < 0 || table[i] >= limits.num_blocks) {
        return absl::OutOfRangeError(absl::StrCat("sequence ", s, " block ", i, " is ", table[i],
                                                  ", outside the pool's ", limits.num_blocks,
                                                  " blocks"));
      }
    }
    for (int32_t t = begin; t < end; ++t) {
      if (inputs.positions()[t] < 0 || inputs.positions()[t] >= context) {
        return absl::OutOfRangeError(absl::StrCat("token ", t, " of sequence ", s, " has position ",
                                                  inputs.positions()[t], ", outside its context 0..",
                                                  context - 1));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace kvjit::runtime
