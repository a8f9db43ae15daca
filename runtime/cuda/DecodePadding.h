#ifndef KVJIT_RUNTIME_CUDA_DECODEPADDING_H_
#define KVJIT_RUNTIME_CUDA_DECODEPADDING_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "runtime/exec/StepRunner.h"

namespace kvjit::cuda {

// Decode steps replay CUDA graphs, one per batch-size bucket (1, 2, 4, ...).
// A graph captures every launch's grid and every kernel argument: device
// pointers and the step's sizes (T, S, L, block-table columns). So a graph
// serves a step only when
//  - the step's inputs sit in the same device buffers as at capture: the
//    runner uploads every step's inputs into fixed buffers before it
//    launches the graph, and reads the logits from the fixed arena after;
//  - the sizes are those of the capture: the step is padded to the bucket.
// Padding a pure decode step (one new token per sequence) of S sequences to
// a bucket B >= S appends B - S padding sequences of one token each: token
// 0 at position 0, whose K and V go to slot 0 of the runner's padding block
// (a KV block past the pool's, which no request owns), with a context of 1
// and a block table pointing at that block. A padding sequence therefore
// attends only to its own slot, so its rows stay finite and it reads and
// writes nothing of a real sequence; every padding token computes the same
// K and V, so their concurrent writes to the one slot agree. Block tables are
// widened to a fixed number of columns, the new columns pointing at the
// padding block (never read: context lengths bound what attention reads).
// Logits rows past the step's L point at padding rows and are not copied back.
// Each input's padding value is its row's decode_padding in the step
// contract (runtime/schema/StepContract.h).
// Real rows compute exactly what they would unpadded: every kernel of a
// decode step treats rows and sequences independently (batch invariance).
class DecodeBuckets {
 public:
  // Buckets are the powers of two up to `largest`; none when it is below 1.
  explicit DecodeBuckets(int64_t largest);

  // The smallest bucket that holds `inputs`, or nothing when the step is not
  // a pure decode step (some sequence has other than one new token), has
  // more sequences than the largest bucket, or has more block-table columns
  // than `max_columns`.
  std::optional<int64_t> BucketFor(const runtime::StepInputs& inputs, int64_t max_columns) const;

  const std::vector<int64_t>& buckets() const { return buckets_; }

 private:
  std::vector<int64_t> buckets_;
};

// `inputs`, a pure decode step that BucketFor placed in `bucket`, padded as
// described above to `bucket` sequences and `columns` block-table columns.
runtime::StepInputs PadDecodeStep(const runtime::StepInputs& inputs, int64_t bucket,
                                  int64_t columns, int32_t padding_block, int64_t block_size);

}  // namespace kvjit::cuda

#endif  // KVJIT_RUNTIME_CUDA_DECODEPADDING_H_
