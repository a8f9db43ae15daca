#include "runtime/cpu/QuantizedKeyScores.h"

#include <cassert>

#include "runtime/schema/KvCacheFormat.h"

namespace kvjit::cpu {
namespace {

template <typename Kernels>
auto KernelFor(const Kernels& kernels, kvx::StorageType key_type) -> decltype(kernels.q8_0) {
  return key_type == kvx::StorageType::Q4_0 ? kernels.q4_0 : kernels.q8_0;
}

}  // namespace

QuantizedKeyScorer::QuantizedKeyScorer(CpuIsa isa, kvx::StorageType key_type, int64_t head_dim,
                                       int64_t max_heads)
    : row_dot_(KernelFor(internal::PortableDotKernels(), key_type)),
      rows_dot_(nullptr),
      isa_(isa),
      head_dim_(head_dim),
      blocks_per_head_(head_dim / kvx::kKvCacheBlockElements),
      queries_(static_cast<size_t>(max_heads * blocks_per_head_)) {
  assert(kvx::QuantizesQuery(key_type));
#if defined(KVJIT_CPU_HAVE_AVX2_KERNELS)
  if (isa != CpuIsa::kPortable) {
    row_dot_ = KernelFor(internal::Avx2DotKernels(), key_type);
    rows_dot_ = KernelFor(internal::Avx2RowsDotKernels(), key_type);
  }
#endif
}

void QuantizedKeyScorer::SetQueries(const float* queries, int64_t heads) {
  assert(heads * blocks_per_head_ <= static_cast<int64_t>(queries_.size()));
  heads_ = heads;
  internal::QuantizeQ8Blocks32(isa_, queries, heads * blocks_per_head_, queries_.data());
}

void QuantizedKeyScorer::Score(const uint8_t* keys, int64_t key_stride, int64_t rows, float scale, float* out,
                               int64_t out_stride) const {
  for (int64_t h = 0; h < heads_; ++h) {
    const internal::Q8Block32* query = queries_.data() + h * blocks_per_head_;
    float* scores = out + h * out_stride;
    if (rows_dot_ != nullptr) {
      rows_dot_(keys, key_stride, rows, query, head_dim_, scores);
    } else {
      for (int64_t r = 0; r < rows; ++r) scores[r] = row_dot_(keys + r * key_stride, query, head_dim_);
    }
    for (int64_t r = 0; r < rows; ++r) scores[r] *= scale;
  }
}

}  // namespace kvjit::cpu
