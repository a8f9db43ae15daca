#include "runtime/cpu/PagedAttention.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/core/StatusMacros.h"
#include "runtime/cpu/DotKernels.h"
#include "runtime/cpu/FastExp.h"
#include "runtime/cpu/FloatDot.h"
#include "runtime/cpu/HalfDot.h"
#include "runtime/cpu/KvCacheRows.h"
#include "runtime/cpu/Prefetch.h"
#include "runtime/cpu/QuantizedKeyScores.h"
#include "runtime/schema/KvCacheFormat.h"

namespace kvjit::cpu {
namespace {

absl::Status CheckLayout(absl::string_view kernel, const PagedKvLayout& layout, int64_t layer, int64_t num_blocks) {
  if (layout.layers <= 0 || layout.kv_heads <= 0 || layout.head_dim <= 0 || layout.block_size <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(kernel, ": KV layout needs positive layers (", layout.layers,
                                                   "), kv_heads (", layout.kv_heads, "), head_dim (",
                                                   layout.head_dim, ") and block_size (", layout.block_size, ")"));
  }
  if (layer < 0 || layer >= layout.layers) {
    return absl::InvalidArgumentError(absl::StrCat(kernel, ": layer ", layer, " outside 0..", layout.layers - 1));
  }
  if (num_blocks < 0) return absl::InvalidArgumentError(absl::StrCat(kernel, ": negative block count ", num_blocks));
  if (!kvx::IsValidRotation(layout.key_rotation, layout.head_dim) ||
      !kvx::IsValidRotation(layout.value_rotation, layout.head_dim)) {
    return absl::InvalidArgumentError(absl::StrCat(kernel, ": rotations of ", layout.key_rotation, " and ",
                                                   layout.value_rotation, " elements do not divide head_dim ",
                                                   layout.head_dim, " as powers of two"));
  }
  return absl::OkStatus();
}

// Where one kv head's cache of one sequence lies.
struct HeadCache {
  const uint8_t* layer_base;  // the pool, advanced to the layer
  const int32_t* block_table;
  const PagedKvLayout* layout;
  int64_t key_offset;    // the kv head's keys within a slot's, in bytes
  int64_t value_offset;  // and its values within a slot's

  const uint8_t* Block(int64_t position) const {
    return layer_base + block_table[position / layout->block_size] * layout->BlockBytes();
  }
  const uint8_t* Key(int64_t position) const {
    return Block(position) + position % layout->block_size * layout->KeySlotStride() + key_offset;
  }
  const uint8_t* Value(int64_t position) const {
    return Block(position) + layout->ValueOffset() +
           position % layout->block_size * layout->ValueSlotStride() + value_offset;
  }
};

// `count` consecutive f32 rows of head_dim elements, `stride` bytes apart.
struct FloatRows {
  const uint8_t* data;
  int64_t stride;
};

// The keys (or values) of `count` consecutive slots of one block from
// `first`, stored as `type` `slot_stride` bytes apart: in place for f32,
// else converted into `scratch` (count x head_dim floats).
FloatRows AsFloatRows(kvx::StorageType type, const uint8_t* first, int64_t slot_stride, int64_t count,
                      int64_t head_dim, float* scratch) {
  if (type == kvx::StorageType::F32) return {first, slot_stride};
  for (int64_t r = 0; r < count; ++r) LoadKvRow(type, first + r * slot_stride, head_dim, scratch + r * head_dim);
  return {reinterpret_cast<const uint8_t*>(scratch), head_dim * static_cast<int64_t>(sizeof(float))};
}

// The most queries attended together, the query heads of one group (on the
// f16 cache also the next tokens'): their scores and sums stay in the
// thread's cache, and longer groups (multi-query attention's, every query
// head on one kv head) are taken in parts.
constexpr int64_t kMaxGroupedHeads = 8;

// One thread's buffers for the query heads of one kv head's group it
// attends at once.
struct HeadScratch {
  std::vector<float> query;    // [heads, head_dim], rounded to f16 (f16 path)
  // [heads, weights_stride], each row [visible rounded up to 8]: scores, then
  // their exp, then probabilities
  std::vector<float> weights;
  int64_t weights_stride;
  std::vector<float> lanes;  // [heads, HalfDotLanes, head_dim] (f16) or [heads, head_dim] (f32): the weighted sums of values
  std::vector<float> rows;   // [block_size, head_dim]: a run of keys or values converted to f32
  std::vector<float> rotated_queries;  // [heads, head_dim]: the group's queries, rotated as the keys are
  std::optional<QuantizedKeyScorer> key_scorer;  // for keys whose scores are integer dot products
  std::vector<const uint8_t*> value_rows;        // [weights_stride]: the f16 value row of each position
};

// The first cached position the query at `position` reads.
int64_t FirstVisible(int64_t position, int64_t window) {
  return window > 0 ? std::max<int64_t>(0, position - window + 1) : 0;
}

// Gemma 2's attention-logit soft-capping of scaled scores, cap · tanh(s / cap)
// in f32 as ggml's scale, tanh and scale compute it; a cap of 0 changes nothing.
void SoftCapScores(float* scores, int64_t count, float cap) {
  if (cap == 0.0f) return;
  const float inverse = 1.0f / cap;
  for (int64_t j = 0; j < count; ++j) scores[j] = cap * std::tanh(scores[j] * inverse);
}

// Keys from `begin` up to `end` in runs that stay within one block each.
template <typename Visit>
void ForEachBlockRun(int64_t begin, int64_t end, int64_t block_size, Visit visit) {
  for (int64_t first = begin; first < end;) {
    const int64_t count = std::min(block_size - first % block_size, end - first);
    visit(first, count);
    first += count;
  }
}

// A head's scores, then weights, over the keys at positions begin..end-1,
// indexed from the register of 8 that holds `begin`: the key at position p
// sits at p - base, in lane p % 8, as in a row of all the sequence's keys.
struct LaneAlignedWeights {
  LaneAlignedWeights(float* storage, int64_t begin, int64_t end)
      : row(storage), base(begin / 8 * 8), begin(begin), end(end) {}

  float* At(int64_t position) const { return row + (position - base); }

  // Sets the slots before `begin` and after `end` in their registers to 0
  // (the weight of a key outside the range) and returns the row's length in
  // whole registers.
  int64_t ZeroPadding() const {
    const int64_t padded = (end - base + 7) / 8 * 8;
    std::fill(row, At(begin), 0.0f);
    std::fill(At(end), row + padded, 0.0f);
    return padded;
  }

  float* row;
  int64_t base;
  int64_t begin;
  int64_t end;
};

// Asks for the f16 key and value rows of positions begin..end-1 into L2,
// block run by block run (a slot's address costs a few KvRowBytes calls).
void PrefetchHeadRows(const HeadCache& cache, int64_t begin, int64_t end) {
  const PagedKvLayout& layout = *cache.layout;
  const int64_t row_bytes = KvRowBytes(kvx::StorageType::F16, layout.head_dim);
  const int64_t key_stride = layout.KeySlotStride();
  const int64_t value_stride = layout.ValueSlotStride();
  ForEachBlockRun(begin, end, layout.block_size, [&](int64_t first, int64_t count) {
    const uint8_t* keys = cache.Key(first);
    const uint8_t* values = cache.Value(first);
    for (int64_t r = 0; r < count; ++r) {
      internal::PrefetchLinesToL2(keys + r * key_stride, row_bytes);
      internal::PrefetchLinesToL2(values + r * value_stride, row_bytes);
    }
  });
}

// One query of those a chunk attends together on the f16 cache: its row,
// its output, and the end of the positions it sees.
struct HalfQuery {
  const float* query;
  float* out;
  int64_t end;
};

// `count` queries on one kv head's cache from position `begin` (each up to
// its own end), each as ggml's non-flash attention computes it alone on AVX2
// (see PagedAttention.h): the queries read each key and value row once for
// all of them (HalfDotRowsQueries, HalfAxpyRowPointersQueries), and every
// query's arithmetic is its own. A query that ends before the chunk's last
// has scores past its end computed and left out, and weight 0 there in the
// value sums, as ggml's masked keys have: a lane sum starts at +0 and no
// rounding makes it -0, so a 0 product changes no bit of it.
void AttendHalfQueries(const HalfQuery* queries, int64_t count, const HeadCache& cache, int64_t begin, float scale,
                       float softcap, HalfDotOrder order, HeadScratch& scratch) {
  const int64_t head_dim = cache.layout->head_dim;
  const int64_t stride = scratch.weights_stride;
  int64_t end = begin;
  for (int64_t q = 0; q < count; ++q) {
    RoundToHalfRow(queries[q].query, scratch.query.data() + q * head_dim, head_dim);
    end = std::max(end, queries[q].end);
  }
  // As ggml's row of all keys would be; positions before `begin` are masked
  // keys, weight 0. Query q's row starts `stride` floats after query q - 1's.
  const LaneAlignedWeights first_query(scratch.weights.data(), begin, end);
  const int64_t block_size = cache.layout->block_size;
  ForEachBlockRun(begin, end, block_size, [&](int64_t first, int64_t run) {
    HalfDotRowsQueries(order, cache.Key(first), cache.layout->KeySlotStride(), run, scratch.query.data(), count,
                       head_dim, first_query.At(first), stride);
  });
  for (int64_t q = 0; q < count; ++q) {
    const LaneAlignedWeights weights(scratch.weights.data() + q * stride, begin, queries[q].end);
    const int64_t visible = queries[q].end - begin;
    float* visible_weights = weights.At(begin);
    for (int64_t j = 0; j < visible; ++j) visible_weights[j] *= scale;
    SoftCapScores(visible_weights, visible, softcap);
    float max = -std::numeric_limits<float>::infinity();
    for (int64_t j = 0; j < visible; ++j) max = std::max(max, visible_weights[j]);
    for (int64_t j = 0; j < visible; ++j) visible_weights[j] -= max;
    FastExpRow(visible_weights, visible_weights, visible);
    // ggml sums the exponentials a register of 8 at a time, each folded in
    // f32 and added to a double; its rows are padded with masked keys, whose
    // exponentials are 0.
    const int64_t padded = weights.ZeroPadding();
    double sum = 0.0;
    for (int64_t j = 0; j < padded; j += 8) sum += static_cast<double>(SumEightLanes(weights.row + j, 1));
    const float inverse = static_cast<float>(1.0 / sum);
    // The probabilities rounded to f16, ggml's operand type.
    for (int64_t j = 0; j < visible; ++j) visible_weights[j] *= inverse;
    RoundToHalfRow(visible_weights, visible_weights, visible);
    std::fill(weights.At(queries[q].end), weights.At(end), 0.0f);
  }
  // The weighted sum of values as `order`'s dot product of each value column
  // with the probabilities: position j feeds lane j % lanes of every column.
  // ggml's padded positions have probability 0 and add nothing.
  const int lanes = HalfDotLanes(order);
  const int64_t lanes_stride = lanes * head_dim;
  // The value rows of every position in one call, across blocks, so that
  // AVX-512 takes them lane by lane, each row read whole
  // (HalfAxpyRowPointersQueries): block by block, 32 bytes of every row per
  // 16 columns, Qwen3-0.6B's 512-token prefill spent 460-490 ms in attention
  // against 405 so.
  std::fill(scratch.lanes.begin(), scratch.lanes.begin() + count * lanes_stride, 0.0f);
  ForEachBlockRun(begin, end, block_size, [&](int64_t first, int64_t run) {
    const uint8_t* row = cache.Value(first);
    for (int64_t r = 0; r < run; ++r) scratch.value_rows[first - begin + r] = row + r * cache.layout->ValueSlotStride();
  });
  HalfAxpyRowPointersQueries(scratch.value_rows.data(), end - begin, first_query.At(begin), stride, count, head_dim,
                             scratch.lanes.data(), lanes_stride, lanes, begin);
  for (int64_t q = 0; q < count; ++q) {
    FoldHalfDotLaneRows(order, scratch.lanes.data() + q * lanes_stride, head_dim, queries[q].out);
  }
}

// The query heads [0, heads) of one kv head's group (queries and outputs
// head_dim apart) over the cached positions begin..end-1 of a cache other
// than f16's, its keys and values as f32 or its q8_0 / q4_0 keys in integers
// (see PagedAttention.h), each as it would be alone: all scores, their
// maximum, FastExp of each score's distance to it, the denominator over
// lanes of eight by position, and the weighted sum of values in key order,
// divided by the denominator at the end. The heads read each key and value
// row once for all of them.
void AttendFloatHeads(const float* queries, int64_t heads, const HeadCache& cache, int64_t begin, int64_t end,
                      float scale, float softcap, HeadScratch& scratch, float* out) {
  const int64_t head_dim = cache.layout->head_dim;
  const int64_t visible = end - begin;
  const int64_t stride = scratch.weights_stride;
  // Head h's row starts `stride` floats after head h - 1's, so a position's
  // weight is at the same offset in every row.
  const LaneAlignedWeights first_head(scratch.weights.data(), begin, end);
  const PagedKvLayout& layout = *cache.layout;
  if (scratch.key_scorer.has_value()) {
    scratch.key_scorer->SetQueries(queries, heads);
    ForEachBlockRun(begin, end, layout.block_size, [&](int64_t first, int64_t count) {
      scratch.key_scorer->Score(cache.Key(first), layout.KeySlotStride(), count, scale, first_head.At(first), stride);
    });
  } else {
    ForEachBlockRun(begin, end, layout.block_size, [&](int64_t first, int64_t count) {
      const FloatRows keys = AsFloatRows(layout.key_type, cache.Key(first), layout.KeySlotStride(), count, head_dim,
                                         scratch.rows.data());
      FloatDotRows(keys.data, keys.stride, count, queries, heads, head_dim, scale, first_head.At(first), stride);
    });
  }
  float inverses[kMaxGroupedHeads];
  for (int64_t h = 0; h < heads; ++h) {
    const LaneAlignedWeights weights(scratch.weights.data() + h * stride, begin, end);
    float* visible_weights = weights.At(begin);
    SoftCapScores(visible_weights, visible, softcap);
    const float max = *std::max_element(visible_weights, visible_weights + visible);
    for (int64_t j = 0; j < visible; ++j) visible_weights[j] = visible_weights[j] - max;
    FastExpRow(visible_weights, visible_weights, visible);
    // Lane j % 8 sums the keys at positions j in order; the padding's zeros
    // add nothing to a sum of exponentials (+0 or more).
    const int64_t padded = weights.ZeroPadding();
    float lanes[8] = {};
    for (int64_t j = 0; j < padded; j += 8) {
      for (int l = 0; l < 8; ++l) lanes[l] = lanes[l] + weights.row[j + l];
    }
    inverses[h] = 1.0f / internal::LaneSum(lanes);
  }
  float* sums = scratch.lanes.data();
  std::fill(sums, sums + heads * head_dim, 0.0f);
  ForEachBlockRun(begin, end, layout.block_size, [&](int64_t first, int64_t count) {
    const FloatRows values = AsFloatRows(layout.value_type, cache.Value(first), layout.ValueSlotStride(), count,
                                         head_dim, scratch.rows.data());
    FloatAxpyRows(values.data, values.stride, count, first_head.At(first), stride, heads, head_dim, sums);
  });
  for (int64_t h = 0; h < heads; ++h) {
    for (int64_t d = 0; d < head_dim; ++d) out[h * head_dim + d] = sums[h * head_dim + d] * inverses[h];
  }
}

absl::Status CheckBatch(const PagedAttentionBatch& batch, int64_t tokens, const PagedKvLayout& layout,
                        int64_t num_blocks, int64_t window) {
  const int64_t sequences = batch.num_sequences;
  if (sequences < 0 || batch.max_blocks_per_sequence < 0) {
    return absl::InvalidArgumentError(absl::StrCat("PagedAttention: negative sequence count ", sequences,
                                                   " or blocks per sequence ", batch.max_blocks_per_sequence));
  }
  if (batch.seq_starts == nullptr || (sequences > 0 && (batch.context_lens == nullptr || batch.block_tables == nullptr)) ||
      (tokens > 0 && batch.positions == nullptr)) {
    return absl::InvalidArgumentError(
        absl::StrCat("PagedAttention: null batch metadata for ", sequences, " sequences, ", tokens, " tokens"));
  }
  if (batch.seq_starts[0] != 0 || batch.seq_starts[sequences] != tokens) {
    return absl::InvalidArgumentError(absl::StrCat("PagedAttention: seq_starts must run from 0 to ", tokens,
                                                   ", got ", batch.seq_starts[0], " .. ", batch.seq_starts[sequences]));
  }
  const int64_t capacity = batch.max_blocks_per_sequence * layout.block_size;
  for (int64_t s = 0; s < sequences; ++s) {
    const int32_t begin = batch.seq_starts[s], end = batch.seq_starts[s + 1];
    if (end < begin) {
      return absl::InvalidArgumentError(
          absl::StrCat("PagedAttention: seq_starts decreases at sequence ", s, " (", begin, " -> ", end, ")"));
    }
    const int64_t context = batch.context_lens[s];
    if (context < 0 || context > capacity) {
      return absl::OutOfRangeError(absl::StrCat("PagedAttention: sequence ", s, " has context length ", context,
                                                ", outside 0..", capacity, " (", batch.max_blocks_per_sequence,
                                                " blocks of ", layout.block_size, ")"));
    }
    int64_t first_read = context;
    for (int32_t t = begin; t < end; ++t) {
      if (batch.positions[t] < 0 || batch.positions[t] >= context) {
        return absl::OutOfRangeError(absl::StrCat("PagedAttention: token ", t, " of sequence ", s, " has position ",
                                                  batch.positions[t], ", outside its context 0..", context - 1));
      }
      first_read = std::min(first_read, FirstVisible(batch.positions[t], window));
    }
    // Blocks before the window's first key are not read: the runtime may have
    // given them back, and their entries are stale.
    const int32_t* table = batch.block_tables + s * batch.max_blocks_per_sequence;
    for (int64_t i = first_read / layout.block_size; i * layout.block_size < context; ++i) {
      if (table[i] < 0 || table[i] >= num_blocks) {
        return absl::OutOfRangeError(absl::StrCat("PagedAttention: sequence ", s, " block ", i, " is ", table[i],
                                                  ", outside the pool's ", num_blocks, " blocks"));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status WriteKv(const float* key, const float* value, int64_t tokens, const int32_t* slot_mapping,
                     const PagedKvLayout& layout, int64_t layer, uint8_t* kv_pool, int64_t num_blocks,
                     ThreadPool& pool) {
  KVJIT_RETURN_IF_ERROR(CheckLayout("WriteKv", layout, layer, num_blocks));
  if (tokens < 0) return absl::InvalidArgumentError(absl::StrCat("WriteKv: negative token count ", tokens));
  if (tokens == 0) return absl::OkStatus();
  if (key == nullptr || value == nullptr || slot_mapping == nullptr || kv_pool == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("WriteKv: null pointer for ", tokens, " tokens"));
  }
  const int64_t slots = num_blocks * layout.block_size;
  for (int64_t t = 0; t < tokens; ++t) {
    if (slot_mapping[t] < 0 || slot_mapping[t] >= slots) {
      return absl::OutOfRangeError(absl::StrCat("WriteKv: token ", t, " maps to slot ", slot_mapping[t],
                                                ", outside the pool's ", slots, " slots"));
    }
  }
  const int64_t row_elements = layout.kv_heads * layout.head_dim;
  pool.ParallelFor(tokens, [&](int64_t begin, int64_t end) {
    std::vector<float> rotated(layout.key_rotation > 0 || layout.value_rotation > 0 ? row_elements : 0);
    // The row as the cache keeps it: rotated where the layout says so.
    auto stored_row = [&](const float* row, int64_t rotation) {
      if (rotation == 0) return row;
      std::copy(row, row + row_elements, rotated.begin());
      RotateHadamard(rotated.data(), row_elements, rotation);
      return static_cast<const float*>(rotated.data());
    };
    for (int64_t t = begin; t < end; ++t) {
      const int64_t block = slot_mapping[t] / layout.block_size;
      const int64_t offset = slot_mapping[t] % layout.block_size;
      uint8_t* layer_base = kv_pool + block * layout.BlockBytes() + layer * layout.LayerStride();
      StoreKvRow(layout.key_type, stored_row(key + t * row_elements, layout.key_rotation), row_elements,
                 layer_base + offset * layout.KeySlotStride());
      StoreKvRow(layout.value_type, stored_row(value + t * row_elements, layout.value_rotation), row_elements,
                 layer_base + layout.ValueOffset() + offset * layout.ValueSlotStride());
    }
  });
  return absl::OkStatus();
}

absl::Status PagedAttention(const float* query, int64_t tokens, int64_t heads, const PagedKvLayout& layout,
                            int64_t layer, const uint8_t* kv_pool, int64_t num_blocks,
                            const PagedAttentionBatch& batch, float scale, int64_t window, float softcap,
                            float* out, ThreadPool& pool) {
  KVJIT_RETURN_IF_ERROR(CheckLayout("PagedAttention", layout, layer, num_blocks));
  if (window < 0) return absl::InvalidArgumentError(absl::StrCat("PagedAttention: negative window ", window));
  if (!(softcap >= 0) || std::isinf(softcap)) {
    return absl::InvalidArgumentError(absl::StrCat("PagedAttention: softcap ", softcap, " is not 0 or positive and finite"));
  }
  if (tokens < 0 || heads <= 0 || heads % layout.kv_heads != 0) {
    return absl::InvalidArgumentError(absl::StrCat("PagedAttention: ", tokens, " tokens of ", heads,
                                                   " query heads; heads must be a positive multiple of kv_heads (",
                                                   layout.kv_heads, ")"));
  }
  KVJIT_RETURN_IF_ERROR(CheckBatch(batch, tokens, layout, num_blocks, window));
  if (tokens == 0) return absl::OkStatus();
  if (query == nullptr || out == nullptr || kv_pool == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("PagedAttention: null query, output or pool for ", tokens, " tokens"));
  }

  std::vector<int32_t> sequence_of_token(static_cast<size_t>(tokens));
  for (int64_t s = 0; s < batch.num_sequences; ++s) {
    for (int32_t t = batch.seq_starts[s]; t < batch.seq_starts[s + 1]; ++t) sequence_of_token[t] = static_cast<int32_t>(s);
  }

  const int64_t head_dim = layout.head_dim;
  const int64_t group = heads / layout.kv_heads;
  // f16 keys and values follow llama.cpp's arithmetic, unrotated as
  // llama.cpp keeps them; every other cache takes the f32 path over its f32
  // values.
  const bool half = layout.key_type == kvx::StorageType::F16 && layout.value_type == kvx::StorageType::F16 &&
                    layout.key_rotation == 0 && layout.value_rotation == 0;
  int64_t max_context = 0;
  for (int64_t s = 0; s < batch.num_sequences; ++s) max_context = std::max<int64_t>(max_context, batch.context_lens[s]);
  // A work item is one query head of one token: a decode step of a GQA model
  // has only a few kv heads, and splitting by them leaves one thread with
  // twice the other's work (3 kv heads on 2 threads). The heads of a group
  // mostly fall in one chunk, and a chunk attends the heads it holds of one
  // group together, reading each K and V row once for them. Items run kv
  // head by kv head, token by token within one, so that a thread reads one
  // kv head's keys and values for every token while they are in its cache:
  // token by token, every head's (a whole layer's cache, 2 MB for a 512-token
  // prompt of Qwen3-0.6B) passed through L2 once per token, and a 512-token
  // prefill's attention ran at 40 GFLOP/s.
  //
  // On the f16 cache a chunk goes on past its token into the next tokens of
  // the same sequence that see from the same position (a prefill's; Phi-3,
  // whose 32 query heads have 32 kv heads, spent 17% of a 512-token prefill
  // in attention at 30 GFLOP/s reading each key and value row once per
  // query row).
  const int64_t chunk_queries = half ? kMaxGroupedHeads : std::min(group, kMaxGroupedHeads);
  const CpuIsa isa = BestCpuIsa();
  pool.ParallelFor(tokens * heads, [&](int64_t begin, int64_t end) {
    const int64_t weights_stride = (max_context + 7) / 8 * 8;
    const int64_t lanes_per_head = half ? HalfDotLanes(HalfDotOrder::kVecDot) : 1;
    HeadScratch scratch{std::vector<float>(static_cast<size_t>(chunk_queries * head_dim)),
                        std::vector<float>(static_cast<size_t>(chunk_queries * weights_stride)), weights_stride,
                        std::vector<float>(static_cast<size_t>(chunk_queries * lanes_per_head * head_dim)),
                        std::vector<float>(half ? 0 : static_cast<size_t>(layout.block_size * head_dim)),
                        std::vector<float>(static_cast<size_t>(chunk_queries * head_dim)),
                        std::nullopt,
                        std::vector<const uint8_t*>(half ? static_cast<size_t>(weights_stride) : 0)};
    if (kvx::QuantizesQuery(layout.key_type)) scratch.key_scorer.emplace(isa, layout.key_type, head_dim, chunk_queries);
    for (int64_t item = begin, items = 1; item < end; item += items) {
      const int64_t kv_head = item / (tokens * group);
      const int64_t t = item % (tokens * group) / group;
      const int64_t head_in_group = item % group;
      const int32_t sequence = sequence_of_token[t];
      const HeadCache cache{kv_pool + layer * layout.LayerStride(),
                            batch.block_tables + sequence * batch.max_blocks_per_sequence, &layout,
                            KvRowBytes(layout.key_type, kv_head * head_dim),
                            KvRowBytes(layout.value_type, kv_head * head_dim)};
      const int64_t row = (t * heads + kv_head * group + head_in_group) * head_dim;
      const int64_t first = FirstVisible(batch.positions[t], window);
      const int64_t last = static_cast<int64_t>(batch.positions[t]) + 1;
      if (!half) {
        // The chunk's heads of this kv head's group, at most kMaxGroupedHeads.
        items = std::min({end, item - head_in_group + group, item + chunk_queries}) - item;
        const float* queries = query + row;
        if (layout.key_rotation > 0) {
          std::copy(queries, queries + items * head_dim, scratch.rotated_queries.begin());
          RotateHadamard(scratch.rotated_queries.data(), items * head_dim, layout.key_rotation);
          queries = scratch.rotated_queries.data();
        }
        AttendFloatHeads(queries, items, cache, first, last, scale, softcap, scratch, out + row);
        if (layout.value_rotation > 0) RotateHadamard(out + row, items * head_dim, layout.value_rotation);
        continue;
      }
      // The sequence's own row count picks the order, as llama.cpp's batch
      // size does for a batch of one sequence: other sequences in the step
      // change nothing.
      const bool decode = batch.seq_starts[sequence + 1] - batch.seq_starts[sequence] == 1;
      const HalfDotOrder order = decode ? HalfDotOrder::kVecDot : HalfDotOrder::kTinyBlas;
      // A decode step's rows come from memory, each sequence's read by its
      // one token, a kv head's rows a slot apart (2 KiB for Qwen3-0.6B, a
      // page every other row, where the hardware prefetchers stop); asked for
      // all at once, 16 decodes' attention of Qwen3-0.6B took 14% of a step
      // instead of 21%. A prefill's rows are in cache from its previous token.
      if (decode) PrefetchHeadRows(cache, first, last);
      // The chunk: this kv head's items from `item` on, at most
      // kMaxGroupedHeads, while their tokens are the sequence's and see from
      // `first`.
      HalfQuery chunk[kMaxGroupedHeads];
      items = 0;
      for (int64_t next = item; next < end && items < kMaxGroupedHeads; ++next, ++items) {
        const int64_t next_t = next % (tokens * group) / group;
        if (next / (tokens * group) != kv_head || sequence_of_token[next_t] != sequence ||
            FirstVisible(batch.positions[next_t], window) != first) {
          break;
        }
        const int64_t next_row = (next_t * heads + kv_head * group + next % group) * head_dim;
        chunk[items] = {query + next_row, out + next_row, static_cast<int64_t>(batch.positions[next_t]) + 1};
      }
      AttendHalfQueries(chunk, items, cache, first, scale, softcap, order, scratch);
    }
  });
  return absl::OkStatus();
}

}  // namespace kvjit::cpu
