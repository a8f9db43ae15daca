#include "runtime/cuda/DecodePadding.h"

#include <utility>

namespace kvjit::cuda {
namespace {

using runtime::StepInputs;
using runtime::StepSizes;

// Rows of `spec` and elements per row in a step of `sizes`.
std::pair<int64_t, int64_t> RowsAndWidth(const kvx::StepInputSpec& spec, const StepSizes& sizes) {
  static_assert(kvx::kMaxStepInputRank == 2, "a step input is rows of at most one more dimension");
  const int64_t rows = runtime::DimExtent(spec.dims[0], 0, sizes);
  const int64_t width = spec.rank == 2 ? runtime::DimExtent(spec.dims[1], 0, sizes) : 1;
  return {rows, width};
}

int32_t PaddingValue(kvx::DecodePadding padding, int64_t row, int32_t padding_block,
                     int32_t padding_slot) {
  switch (padding) {
    case kvx::DecodePadding::kZero:
      return 0;
    case kvx::DecodePadding::kOne:
      return 1;
    case kvx::DecodePadding::kRow:
      return static_cast<int32_t>(row);
    case kvx::DecodePadding::kPaddingSlot:
      return padding_slot;
    case kvx::DecodePadding::kPaddingBlock:
      return padding_block;
  }
  return 0;
}

}  // namespace

DecodeBuckets::DecodeBuckets(int64_t largest) {
  for (int64_t bucket = 1; bucket <= largest; bucket *= 2) {
    buckets_.push_back(bucket);
  }
}

std::optional<int64_t> DecodeBuckets::BucketFor(const StepInputs& inputs,
                                                int64_t max_columns) const {
  const StepSizes sizes = runtime::SizesOf(inputs);
  const StepInputs::Values& seq_starts = inputs[kvx::StepInput::SeqStarts];
  if (sizes.sequences == 0 || sizes.tokens != sizes.sequences ||
      static_cast<int64_t>(seq_starts.size()) != sizes.sequences + 1 ||
      sizes.max_blocks > max_columns) {
    return std::nullopt;
  }
  for (int64_t s = 0; s <= sizes.sequences; ++s) {
    if (seq_starts[s] != s) return std::nullopt;
  }
  for (int64_t bucket : buckets_) {
    if (bucket >= sizes.sequences) return bucket;
  }
  return std::nullopt;
}

StepInputs PadDecodeStep(const StepInputs& inputs, int64_t bucket, int64_t columns,
                         int32_t padding_block, int64_t block_size) {
  const StepSizes sizes = runtime::SizesOf(inputs);
  const StepSizes padded_sizes = {bucket, bucket, bucket, columns};
  const int32_t padding_slot = static_cast<int32_t>(padding_block * block_size);
  StepInputs padded;
  padded.max_blocks = columns;
  for (const kvx::StepInputSpec& spec : kvx::kStepInputs) {
    const StepInputs::Values& values = inputs[spec.input];
    const auto [rows, width] = RowsAndWidth(spec, sizes);
    const auto [padded_rows, padded_width] = RowsAndWidth(spec, padded_sizes);
    StepInputs::Values& out = padded[spec.input];
    out.resize(padded_rows * padded_width);
    for (int64_t row = 0; row < padded_rows; ++row) {
      const int32_t padding = PaddingValue(spec.decode_padding, row, padding_block, padding_slot);
      for (int64_t column = 0; column < padded_width; ++column) {
        out[row * padded_width + column] =
            row < rows && column < width ? values[row * width + column] : padding;
      }
    }
  }
  return padded;
}

}  // namespace kvjit::cuda
