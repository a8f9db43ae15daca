#include "ir/Reference/RefKvCache.h"

#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "ir/Reference/RefCacheRounding.h"
#include "ir/Reference/RefKernels.h"
#include "ir/Kv/KvTypes.h"
#include "runtime/schema/KvCacheFormat.h"

namespace kvjit::reference {

RefKvCache::RefKvCache(int64_t layers, int64_t kv_heads, int64_t head_dim, int64_t block_size,
                       int64_t num_blocks, kv::CacheElement key_type, kv::CacheElement value_type,
                       int64_t key_rotation, int64_t value_rotation)
    : layers_(layers),
      kv_heads_(kv_heads),
      head_dim_(head_dim),
      block_size_(block_size),
      num_blocks_(num_blocks),
      key_type_(key_type),
      value_type_(value_type),
      key_rotation_(key_rotation),
      value_rotation_(value_rotation),
      keys_(num_blocks * block_size * layers * kv_heads * head_dim, 0.0f),
      values_(keys_.size(), 0.0f) {}

absl::Status RefKvCache::Write(int64_t layer, const RefTensor& key, const RefTensor& value,
                               const RefTensor& slots) {
  const int64_t tokens = key.shape.empty() ? 0 : key.shape[0];
  if (key.shape != std::vector<int64_t>{tokens, kv_heads_, head_dim_} || value.shape != key.shape ||
      static_cast<int64_t>(slots.ints.size()) != tokens || layer < 0 || layer >= layers_) {
    return absl::InvalidArgumentError(absl::StrCat("kv.write: key ", key.ShapeString(), ", value ",
                                                   value.ShapeString(), ", ", slots.ints.size(),
                                                   " slots do not fit the cache"));
  }
  for (int64_t t = 0; t < tokens; ++t) {
    const int64_t slot = slots.ints[t];
    if (slot < 0 || slot >= num_blocks_ * block_size_) {
      return absl::OutOfRangeError(absl::StrCat("kv.write: slot ", slot, " of token ", t,
                                                " is outside the pool of ", num_blocks_,
                                                " blocks of ", block_size_));
    }
    for (int64_t h = 0; h < kv_heads_; ++h) {
      const int64_t source = (t * kv_heads_ + h) * head_dim_;
      float* key_row = keys_.data() + Offset(slot, layer, h);
      float* value_row = values_.data() + Offset(slot, layer, h);
      std::copy_n(key.values.begin() + source, head_dim_, key_row);
      std::copy_n(value.values.begin() + source, head_dim_, value_row);
      if (key_rotation_ > 0) RotateAsCacheStores(key_row, head_dim_, key_rotation_);
      if (value_rotation_ > 0) RotateAsCacheStores(value_row, head_dim_, value_rotation_);
      RoundAsCacheStores(key_type_, key_row, head_dim_);
      RoundAsCacheStores(value_type_, value_row, head_dim_);
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<RefTensor> RefKvCache::Attend(int64_t layer, const RefTensor& query,
                                             const RefTensor& positions,
                                             const RefTensor& seq_starts,
                                             const RefTensor& context_lens,
                                             const RefTensor& block_tables, double scale,
                                             int64_t window, double softcap) const {
  auto error = [](auto... parts) {
    return absl::InvalidArgumentError(absl::StrCat("kv.attention: ", parts...));
  };
  if (query.shape.size() != 3 || query.shape[2] != head_dim_ || query.shape[1] % kv_heads_ != 0) {
    return error("query ", query.ShapeString(), " does not fit the cache");
  }
  const int64_t heads = query.shape[1];
  const int64_t group = heads / kv_heads_;
  const int64_t sequences = static_cast<int64_t>(context_lens.ints.size());
  const int64_t max_blocks = block_tables.shape.size() == 2 ? block_tables.shape[1] : 0;
  if (static_cast<int64_t>(seq_starts.ints.size()) != sequences + 1 ||
      block_tables.shape.size() != 2 || block_tables.shape[0] != sequences ||
      seq_starts.ints.back() != query.shape[0] ||
      static_cast<int64_t>(positions.ints.size()) != query.shape[0]) {
    return error("step metadata does not describe ", query.shape[0], " tokens of ", sequences,
                 " sequences");
  }
  for (int64_t s = 0; s < sequences; ++s) {
    if (seq_starts.ints[s] > seq_starts.ints[s + 1] || (s == 0 && seq_starts.ints[0] != 0)) {
      return error("seq_starts must rise from 0 to the token count");
    }
  }
  for (int32_t position : positions.ints) {
    if (position < 0) return error("position ", position, " is negative");
  }
  RefTensor out = RefTensor::Float(query.shape, std::vector<float>(query.values.size()));
  std::vector<double> scores;
  for (int64_t s = 0; s < sequences; ++s) {
    for (int64_t t = seq_starts.ints[s]; t < seq_starts.ints[s + 1]; ++t) {
      const int64_t visible = positions.ints[t] + 1;
      if (visible > context_lens.ints[s] || visible > max_blocks * block_size_) {
        return error("token ", t, " at position ", positions.ints[t], " of sequence ", s,
                     " is past its context of ", context_lens.ints[s]);
      }
      // Keys are indexed from the window's first position on.
      const int64_t first = window > 0 ? std::max<int64_t>(0, visible - window) : 0;
      const int64_t keys = visible - first;
      scores.assign(keys, 0.0);
      std::vector<int64_t> slots(keys);
      for (int64_t j = 0; j < keys; ++j) {
        const int64_t key_position = first + j;
        const int32_t block = block_tables.ints[s * max_blocks + key_position / block_size_];
        if (block < 0 || block >= num_blocks_) {
          return error("sequence ", s, " names block ", block, " outside the pool");
        }
        slots[j] = block * block_size_ + key_position % block_size_;
      }
      for (int64_t h = 0; h < heads; ++h) {
        const int64_t kv = h / group;
        std::vector<float> q(query.values.begin() + (t * heads + h) * head_dim_,
                             query.values.begin() + (t * heads + h + 1) * head_dim_);
        if (key_rotation_ > 0) RotateAsCacheStores(q.data(), head_dim_, key_rotation_);
        // Integer-dot keys meet the query as q8_0 blocks give it back.
        if (kvx::QuantizesQuery(kv::CacheFormat(key_type_).type)) {
          RoundAsCacheStores(kv::CacheElement::q8_0, q.data(), head_dim_);
        }
        double max_score = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < keys; ++j) {
          const float* k = &keys_[Offset(slots[j], layer, kv)];
          double dot = 0;
          for (int64_t e = 0; e < head_dim_; ++e) dot += static_cast<double>(q[e]) * k[e];
          scores[j] = SoftCap(dot * scale, softcap);
          max_score = std::max(max_score, scores[j]);
        }
        double sum = 0;
        for (double& score : scores) sum += (score = std::exp(score - max_score));
        float* o = &out.values[(t * heads + h) * head_dim_];
        for (int64_t e = 0; e < head_dim_; ++e) {
          double acc = 0;
          for (int64_t j = 0; j < keys; ++j) {
            acc += scores[j] / sum * values_[Offset(slots[j], layer, kv) + e];
          }
          o[e] = static_cast<float>(acc);
        }
        if (value_rotation_ > 0) RotateAsCacheStores(o, head_dim_, value_rotation_);
      }
    }
  }
  return out;
}

}  // namespace kvjit::reference
