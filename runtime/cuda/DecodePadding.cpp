#include "runtime/cuda/DecodePadding.h"

#include <algorithm>

namespace kvjit::cuda {

DecodeBuckets::DecodeBuckets(int64_t largest) {
  for (int64_t bucket = 1; bucket <= largest; bucket *= 2) {
    buckets_.push_back(bucket);
  }
}

std::optional<int64_t> DecodeBuckets::BucketFor(const runtime::StepInputs& inputs,
                                                int64_t max_columns) const {
  const int64_t sequences = static_cast<int64_t>(inputs.context_lens.size());
  if (sequences == 0 || static_cast<int64_t>(inputs.tokens.size()) != sequences ||
      static_cast<int64_t>(inputs.seq_starts.size()) != sequences + 1 ||
      inputs.max_blocks > max_columns) {
    return std::nullopt;
  }
  for (int64_t s = 0; s <= sequences; ++s) {
    if (inputs.seq_starts[s] != s) return std::nullopt;
  }
  for (int64_t bucket : buckets_) {
    if (bucket >= sequences) return bucket;
  }
  return std::nullopt;
}

runtime::StepInputs PadDecodeStep(const runtime::StepInputs& inputs, int64_t bucket,
                                  int64_t columns, int32_t padding_block, int64_t block_size) {
  const int64_t sequences = static_cast<int64_t>(inputs.context_lens.size());
  const int32_t padding_slot = static_cast<int32_t>(padding_block * block_size);
  runtime::StepInputs padded;
  padded.tokens = inputs.tokens;
  padded.tokens.resize(bucket, 0);
  padded.positions = inputs.positions;
  padded.positions.resize(bucket, 0);
  padded.slot_mapping = inputs.slot_mapping;
  padded.slot_mapping.resize(bucket, padding_slot);
  padded.context_lens = inputs.context_lens;
  padded.context_lens.resize(bucket, 1);
  padded.seq_starts.resize(bucket + 1);
  for (int64_t s = 0; s <= bucket; ++s) padded.seq_starts[s] = static_cast<int32_t>(s);
  padded.max_blocks = columns;
  padded.block_tables.assign(bucket * columns, padding_block);
  for (int64_t s = 0; s < sequences; ++s) {
    std::copy_n(inputs.block_tables.begin() + s * inputs.max_blocks, inputs.max_blocks,
                padded.block_tables.begin() + s * columns);
  }
  padded.logits_rows = inputs.logits_rows;
  for (int64_t row = static_cast<int64_t>(inputs.logits_rows.size()); row < bucket; ++row) {
    padded.logits_rows.push_back(static_cast<int32_t>(row));
  }
  return padded;
}

}  // namespace kvjit::cuda
