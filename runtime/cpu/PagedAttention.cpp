#include "runtime/cpu/PagedAttention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/core/StatusMacros.h"
#include "runtime/cpu/DotKernels.h"
#include "runtime/cpu/FastExp.h"
#include "runtime/cpu/HalfDot.h"
#include "runtime/quant/Half.h"

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
  return absl::OkStatus();
}

// Copies one kv head's row of `count` consecutive slots of an f32 cache.
void LoadHeadRows(const uint8_t* first_slot, const PagedKvLayout& layout, int64_t count, float* out) {
  for (int64_t s = 0; s < count; ++s) {
    std::memcpy(out + s * layout.head_dim, first_slot + s * layout.SlotStride(),
                static_cast<size_t>(layout.head_dim) * sizeof(float));
  }
}

// Eight interleaved partial sums (vectorizable without reassociation), folded
// in DotKernels.h's fixed order; the tail is added last.
float Dot(const float* a, const float* b, int64_t n) {
  float lanes[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int l = 0; l < 8; ++l) lanes[l] += a[i + l] * b[i + l];
  }
  float sum = internal::LaneSum(lanes);
  for (; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

// One query head's online-softmax state.
struct SoftmaxState {
  float max;
  float denominator;
  float* output;  // head_dim running weighted sum of values
};

// Where the f16 path reads one kv head's cache of one sequence.
struct HalfHeadCache {
  const uint8_t* layer_base;  // the pool, advanced to the layer and the kv head
  const int32_t* block_table;
  const PagedKvLayout* layout;

  const uint8_t* Key(int64_t position) const {
    return layer_base + block_table[position / layout->block_size] * layout->BlockBytes() +
           position % layout->block_size * layout->SlotStride();
  }
  const uint8_t* Value(int64_t position) const { return Key(position) + layout->ValueOffset(); }
};

// One thread's buffers for the f16 path.
struct HalfScratch {
  std::vector<float> query;    // [head_dim], rounded to f16
  std::vector<float> weights;  // [visible rounded up to 8]: scores, then their exp, then probabilities
  std::vector<float> lanes;    // [HalfDotLanes, head_dim]: the probability-weighted sum of values
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

// One query head over the cached positions begin..end-1, as ggml's non-flash
// attention computes it on AVX2 (see PagedAttention.h).
void AttendHalfHead(const float* query, const HalfHeadCache& cache, int64_t begin, int64_t end, float scale,
                    float softcap, HalfDotOrder order, HalfScratch& scratch, float* out) {
  const int64_t head_dim = cache.layout->head_dim;
  RoundToHalfRow(query, scratch.query.data(), head_dim);
  // Indexed from the register of 8 that holds `begin`, as ggml's row of all
  // keys would be; positions before `begin` are masked keys, weight 0.
  const int64_t base = begin / 8 * 8;
  float* weights = scratch.weights.data();
  float* visible_weights = weights + (begin - base);
  const int64_t visible = end - begin;
  float max = -std::numeric_limits<float>::infinity();
  const int64_t block_size = cache.layout->block_size;
  ForEachBlockRun(begin, end, block_size, [&](int64_t first, int64_t count) {
    HalfDotRows(order, cache.Key(first), cache.layout->SlotStride(), count, scratch.query.data(), head_dim,
                weights + (first - base));
  });
  for (int64_t j = 0; j < visible; ++j) visible_weights[j] *= scale;
  SoftCapScores(visible_weights, visible, softcap);
  for (int64_t j = 0; j < visible; ++j) max = std::max(max, visible_weights[j]);
  for (int64_t j = 0; j < visible; ++j) visible_weights[j] -= max;
  FastExpRow(visible_weights, visible_weights, visible);
  // ggml sums the exponentials a register of 8 at a time, each folded in f32
  // and added to a double; its rows are padded with masked keys, whose
  // exponentials are 0.
  const int64_t padded = (end - base + 7) / 8 * 8;
  std::fill(weights, visible_weights, 0.0f);
  std::fill(weights + (end - base), weights + padded, 0.0f);
  double sum = 0.0;
  for (int64_t j = 0; j < padded; j += 8) sum += static_cast<double>(SumEightLanes(weights + j, 1));
  const float inverse = static_cast<float>(1.0 / sum);
  // The weighted sum of values as `order`'s dot product of each value column
  // with the probabilities (rounded to f16, ggml's operand type): position j
  // feeds lane j % lanes of every column. ggml's padded positions have
  // probability 0 and add nothing.
  for (int64_t j = 0; j < visible; ++j) visible_weights[j] *= inverse;
  RoundToHalfRow(visible_weights, visible_weights, visible);
  const int lanes = HalfDotLanes(order);
  std::fill(scratch.lanes.begin(), scratch.lanes.begin() + lanes * head_dim, 0.0f);
  ForEachBlockRun(begin, end, block_size, [&](int64_t first, int64_t count) {
    HalfAxpyRows(cache.Value(first), cache.layout->SlotStride(), count, weights + (first - base), head_dim,
                 scratch.lanes.data(), lanes, first);
  });
  FoldHalfDotLaneRows(order, scratch.lanes.data(), head_dim, out);
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
    for (int64_t t = begin; t < end; ++t) {
      const int64_t block = slot_mapping[t] / layout.block_size;
      const int64_t offset = slot_mapping[t] % layout.block_size;
      uint8_t* key_slot =
          kv_pool + block * layout.BlockBytes() + layer * layout.LayerStride() + offset * layout.SlotStride();
      uint8_t* value_slot = key_slot + layout.ValueOffset();
      const float* key_row = key + t * row_elements;
      const float* value_row = value + t * row_elements;
      if (layout.element_type == KvElementType::kF32) {
        std::memcpy(key_slot, key_row, static_cast<size_t>(row_elements) * sizeof(float));
        std::memcpy(value_slot, value_row, static_cast<size_t>(row_elements) * sizeof(float));
        continue;
      }
      for (int64_t i = 0; i < row_elements; ++i) {
        const uint16_t key_bits = quant::FloatToHalf(key_row[i]);
        const uint16_t value_bits = quant::FloatToHalf(value_row[i]);
        std::memcpy(key_slot + 2 * i, &key_bits, sizeof key_bits);
        std::memcpy(value_slot + 2 * i, &value_bits, sizeof value_bits);
      }
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
  if (layout.element_type == KvElementType::kF16) {
    int64_t max_context = 0;
    for (int64_t s = 0; s < batch.num_sequences; ++s) max_context = std::max<int64_t>(max_context, batch.context_lens[s]);
    pool.ParallelFor(tokens * layout.kv_heads, [&](int64_t begin, int64_t end) {
      HalfScratch scratch{std::vector<float>(static_cast<size_t>(head_dim)),
                          std::vector<float>(static_cast<size_t>((max_context + 7) / 8 * 8)),
                          std::vector<float>(static_cast<size_t>(HalfDotLanes(HalfDotOrder::kVecDot) * head_dim))};
      for (int64_t item = begin; item < end; ++item) {
        const int64_t t = item / layout.kv_heads;
        const int64_t kv_head = item % layout.kv_heads;
        const int32_t sequence = sequence_of_token[t];
        const HalfHeadCache cache{kv_pool + layer * layout.LayerStride() + kv_head * head_dim * layout.ElementBytes(),
                                  batch.block_tables + sequence * batch.max_blocks_per_sequence, &layout};
        // The sequence's own row count picks the order, as llama.cpp's batch
        // size does for a batch of one sequence: other sequences in the step
        // change nothing.
        const bool decode = batch.seq_starts[sequence + 1] - batch.seq_starts[sequence] == 1;
        const HalfDotOrder order = decode ? HalfDotOrder::kVecDot : HalfDotOrder::kTinyBlas;
        for (int64_t g = 0; g < group; ++g) {
          const int64_t row = (t * heads + kv_head * group + g) * head_dim;
          AttendHalfHead(query + row, cache, FirstVisible(batch.positions[t], window),
                         static_cast<int64_t>(batch.positions[t]) + 1, scale, softcap, order, scratch, out + row);
        }
      }
    });
    return absl::OkStatus();
  }
  // A work item is one token's query heads sharing a kv head: each cached
  // block is copied out once for the whole group. Every head still
  // visits its keys in order, so the split changes no result.
  pool.ParallelFor(tokens * layout.kv_heads, [&](int64_t begin, int64_t end) {
    std::vector<float> keys(static_cast<size_t>(layout.block_size * head_dim));
    std::vector<float> values(keys.size());
    std::vector<float> outputs(static_cast<size_t>(group * head_dim));
    std::vector<SoftmaxState> states(static_cast<size_t>(group));
    for (int64_t item = begin; item < end; ++item) {
      const int64_t t = item / layout.kv_heads;
      const int64_t kv_head = item % layout.kv_heads;
      const int32_t sequence = sequence_of_token[t];
      const int32_t* table = batch.block_tables + sequence * batch.max_blocks_per_sequence;
      const int64_t end = static_cast<int64_t>(batch.positions[t]) + 1;
      for (int64_t g = 0; g < group; ++g) {
        states[g] = {-std::numeric_limits<float>::infinity(), 0.0f, outputs.data() + g * head_dim};
        std::fill(states[g].output, states[g].output + head_dim, 0.0f);
      }
      ForEachBlockRun(FirstVisible(batch.positions[t], window), end, layout.block_size, [&](int64_t first,
                                                                                             int64_t count) {
        const uint8_t* key_slots = kv_pool + table[first / layout.block_size] * layout.BlockBytes() +
                                   layer * layout.LayerStride() + first % layout.block_size * layout.SlotStride() +
                                   kv_head * head_dim * layout.ElementBytes();
        LoadHeadRows(key_slots, layout, count, keys.data());
        LoadHeadRows(key_slots + layout.ValueOffset(), layout, count, values.data());
        for (int64_t g = 0; g < group; ++g) {
          const float* q = query + (t * heads + kv_head * group + g) * head_dim;
          SoftmaxState& state = states[g];
          for (int64_t j = 0; j < count; ++j) {
            float score = scale * Dot(q, keys.data() + j * head_dim, head_dim);
            SoftCapScores(&score, 1, softcap);
            if (score > state.max) {
              const float correction = std::exp(state.max - score);
              state.denominator *= correction;
              for (int64_t d = 0; d < head_dim; ++d) state.output[d] *= correction;
              state.max = score;
            }
            const float weight = std::exp(score - state.max);
            state.denominator += weight;
            const float* v = values.data() + j * head_dim;
            for (int64_t d = 0; d < head_dim; ++d) state.output[d] += weight * v[d];
          }
        }
      });
      for (int64_t g = 0; g < group; ++g) {
        float* dst = out + (t * heads + kv_head * group + g) * head_dim;
        const float inverse = 1.0f / states[g].denominator;
        for (int64_t d = 0; d < head_dim; ++d) dst[d] = states[g].output[d] * inverse;
      }
    }
  });
  return absl::OkStatus();
}

}  // namespace kvjit::cpu
