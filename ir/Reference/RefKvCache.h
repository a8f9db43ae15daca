#ifndef KVJIT_IR_REFERENCE_REFKVCACHE_H_
#define KVJIT_IR_REFERENCE_REFKVCACHE_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/Kv/KvAttrs.h"
#include "ir/Reference/RefTensor.h"

namespace kvjit::reference {

// The reference semantics of the paged cache: a pool of blocks of
// `block_size` slots; each slot holds K and V for every layer and KV head,
// each rounded as a cache of `key_type` (`value_type`) stores it, after the
// rotation of `key_rotation` (`value_rotation`) elements where nonzero, which
// attention then applies to the queries (its output). Keys of a type that
// quantizes the query (KvCacheFormat.h: q8_0, q4_0) are scored against the
// rotated query rounded as a q8_0 cache would store it.
class RefKvCache {
 public:
  RefKvCache(int64_t layers, int64_t kv_heads, int64_t head_dim, int64_t block_size,
             int64_t num_blocks, kv::CacheElement key_type = kv::CacheElement::f32,
             kv::CacheElement value_type = kv::CacheElement::f32, int64_t key_rotation = 0,
             int64_t value_rotation = 0);

  int64_t block_size() const { return block_size_; }
  int64_t num_blocks() const { return num_blocks_; }

  // kv.write: token t of key/value [T, kv_heads, head_dim] into slot slots[t].
  absl::Status Write(int64_t layer, const RefTensor& key, const RefTensor& value,
                     const RefTensor& slots);

  // kv.attention over each sequence's cached tokens (see the op's
  // description); `window` and `softcap` 0 for none. Block table entries of positions
  // outside a token's window are not read.
  absl::StatusOr<RefTensor> Attend(int64_t layer, const RefTensor& query, const RefTensor& positions,
                                   const RefTensor& seq_starts, const RefTensor& context_lens,
                                   const RefTensor& block_tables, double scale,
                                   int64_t window, double softcap) const;

 private:
  int64_t Offset(int64_t slot, int64_t layer, int64_t head) const {
    return ((slot * layers_ + layer) * kv_heads_ + head) * head_dim_;
  }

  int64_t layers_, kv_heads_, head_dim_, block_size_, num_blocks_;
  kv::CacheElement key_type_, value_type_;
  int64_t key_rotation_, value_rotation_;
  std::vector<float> keys_;
  std::vector<float> values_;
};

}  // namespace kvjit::reference

#endif  // KVJIT_IR_REFERENCE_REFKVCACHE_H_
