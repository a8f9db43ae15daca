#ifndef KVJIT_RUNTIME_CPU_QUANTIZEDKEYSCORES_H_
#define KVJIT_RUNTIME_CPU_QUANTIZEDKEYSCORES_H_

// Attention scores over cached keys whose type quantizes the query
// (KvCacheFormat.h's QuantizesQuery: q8_0 and q4_0): each query head is
// quantized to q8_0 blocks once, then dotted with each key row in integers,
// block by block, by the kernels MatMul dots q8_0 and q4_0 weight rows with
// quantized activations (DotKernels.h's contract; ggml's vec_dot_q8_0_q8_0
// and vec_dot_q4_0_q8_0, which llama.cpp's flash attention uses for these
// caches). A key row of one kv head is a weight row of head_dim elements.

#include <cstdint>
#include <vector>

#include "runtime/cpu/CpuIsa.h"
#include "runtime/cpu/DotKernels.h"
#include "runtime/schema/kvx_generated.h"

namespace kvjit::cpu {

class QuantizedKeyScorer {
 public:
  // Scores keys of `key_type` (q8_0 or q4_0) for up to `max_heads` query
  // heads at a time, with `isa`'s kernels (the same bits under every ISA).
  QuantizedKeyScorer(CpuIsa isa, kvx::StorageType key_type, int64_t head_dim, int64_t max_heads);

  // Quantizes `heads` query heads, head_dim floats apart, for the next Score.
  void SetQueries(const float* queries, int64_t heads);

  // out[h * out_stride + r] = scale * dot(key row r, query head h) for the
  // `rows` key rows from `keys`, `key_stride` bytes apart, and every head of
  // the last SetQueries.
  void Score(const uint8_t* keys, int64_t key_stride, int64_t rows, float scale, float* out,
             int64_t out_stride) const;

 private:
  internal::RowDot row_dot_;
  internal::RowsDot rows_dot_;  // null where the ISA has none: rows go one by one
  CpuIsa isa_;
  int64_t head_dim_;
  int64_t blocks_per_head_;
  int64_t heads_ = 0;
  std::vector<internal::Q8Block32> queries_;
};

}  // namespace kvjit::cpu

#endif  // KVJIT_RUNTIME_CPU_QUANTIZEDKEYSCORES_H_
