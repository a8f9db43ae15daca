#ifndef KVJIT_RUNTIME_CPU_PAGEDATTENTION_H_
#define KVJIT_RUNTIME_CPU_PAGEDATTENTION_H_

#include <cstdint>

#include "absl/status/status.h"
#include "runtime/cpu/KvCacheRows.h"
#include "runtime/cpu/ThreadPool.h"
#include "runtime/schema/kvx_generated.h"

namespace kvjit::cpu {

// The paged KV pool: one allocation of `num_blocks` blocks, each holding
// block_size token slots for every layer. Within a block the order is
// [layer][keys, then values][slot in block][kv_head][head_dim], i.e. for
// block b, layer l, slot s, kv head g:
//   K: base + b * BlockBytes() + l * LayerStride() + s * KeySlotStride() + KvRowBytes(key_type, g * head_dim)
//   V: base + b * BlockBytes() + l * LayerStride() + ValueOffset() + s * ValueSlotStride()
//      + KvRowBytes(value_type, g * head_dim)
// This is the layout the compiler's plan-memory pass fixes, keys and values
// each stored as their type (runtime/schema/KvCacheFormat.h) says. A slot's
// K (or V) for all heads is contiguous, so writing a token touches two runs
// per layer, and one block's keys for one layer are one contiguous run.
struct PagedKvLayout {
  int64_t layers = 0;
  int64_t kv_heads = 0;
  int64_t head_dim = 0;
  int64_t block_size = 0;
  kvx::StorageType key_type = kvx::StorageType::F16;
  kvx::StorageType value_type = kvx::StorageType::F16;
  // The Walsh-Hadamard blocks keys and values are stored rotated in, 0 for
  // none (KvCacheFormat.h): WriteKv rotates them, PagedAttention rotates
  // each query head by the keys' and its output by the values'.
  int64_t key_rotation = 0;
  int64_t value_rotation = 0;
  // The layers a pool block holds where more than `layers`: a program that
  // reads and writes the first layers of a larger program's pool (the
  // layer-skipping self-draft of speculative decoding); 0 for `layers`.
  int64_t block_layers = 0;

  int64_t KeySlotStride() const { return KvRowBytes(key_type, kv_heads * head_dim); }
  int64_t ValueSlotStride() const { return KvRowBytes(value_type, kv_heads * head_dim); }
  int64_t ValueOffset() const { return block_size * KeySlotStride(); }
  int64_t LayerStride() const { return ValueOffset() + block_size * ValueSlotStride(); }
  int64_t BlockBytes() const { return (block_layers > 0 ? block_layers : layers) * LayerStride(); }
};

// A step's sequences, in the step function's packed ("varlen") form: the
// new tokens of sequence s are rows seq_starts[s] .. seq_starts[s + 1] - 1.
struct PagedAttentionBatch {
  const int32_t* positions = nullptr;     // [tokens]: each token's position in its sequence
  const int32_t* seq_starts = nullptr;    // [num_sequences + 1], from 0 to tokens
  const int32_t* context_lens = nullptr;  // [num_sequences]: cached tokens after this step
  const int32_t* block_tables = nullptr;  // [num_sequences, max_blocks_per_sequence]
  int64_t num_sequences = 0;
  int64_t max_blocks_per_sequence = 0;
};

// Stores each token's key and value ([tokens, kv_heads, head_dim] f32) in its
// cache slot (slot_mapping[t] = block * block_size + offset) of `layer`, as
// the layout's key and value types store them (StoreKvRow). Slots must lie
// in the pool.
absl::Status WriteKv(const float* key, const float* value, int64_t tokens, const int32_t* slot_mapping,
                     const PagedKvLayout& layout, int64_t layer, uint8_t* kv_pool, int64_t num_blocks,
                     ThreadPool& pool);

// Causal attention of query [tokens, heads, head_dim] over the cache of
// `layer`, written to out [tokens, heads, head_dim]: the token at position p
// of sequence s attends to that sequence's keys 0..p, found through its block
// table row. Query head h reads kv head h / (heads / kv_heads) (GQA). A
// positive `window` (sliding-window attention) narrows the keys to those at
// p - window < j <= p; block table entries of blocks wholly before the
// first of them are neither read nor checked (the runtime may have given
// those blocks back). The window changes which keys take part, not how the
// arithmetic below orders them: a key's lane is its position's, as though
// the keys outside the window were masked with weight 0. A positive
// `softcap` (Gemma 2) caps each scaled score s at softcap · tanh(s / softcap)
// before the softmax; 0 leaves the scores as they are.
//
// The arithmetic depends on the cache's element types:
//
// f32, and every pair of key and value types but f16 and f16: for each
// (token, head), in two passes over the keys: score_j =
// scale * dot(q, k_j) (FloatDot.h's 8-lane order), max = the largest score,
// e_j = FastExp(score_j - max), the denominator sums e_j in 8 lanes by
// position (lane j % 8, folded by LaneSum), out = (sum over j in key order
// of e_j * v_j) * (1 / denominator), all in f32 with separate multiplies
// and adds. Keys and values stored otherwise than as f32 take part as their
// f32 values (LoadKvRow), read a block's run at a time: the result is the
// f32 cache's for a cache holding those values. But q8_0 and q4_0 keys
// (KvCacheFormat.h's QuantizesQuery) are scored as llama.cpp's flash
// attention scores them: score_j = dot(k_j, q8_0(q)) * scale, integer dot
// products block by block (QuantizedKeyScores.h); the rest is as above.
//
// f16 keys and values: exactly what llama.cpp's CPU backend computes (AVX2 build, no flash
// attention), bit for bit. Each step of a quantized model re-quantizes its
// activations to 8 bits, which turns a 1-ulp difference anywhere into
// different logits, often a different greedy token; an f16 cache is what
// llama.cpp uses, so kvjit follows its rounding there. The query is rounded
// to f16; score_j = dot(k_j, q) * scale; e_j = FastExp(score_j - max);
// the denominator sums e in registers of 8 (SumEightLanes) added in double;
// p_j = f16(e_j * float(1 / denominator)); out = dot(v column, p). The
// dot products' summation order is llama.cpp's for the batch size: kVecDot
// for a sequence with one row in the step (decode), kTinyBlas for several
// (prefill), see HalfDot.h. kvjit picks it per sequence, by that sequence's
// rows, where llama.cpp picks it per batch, so that a sequence's result never
// depends on the other sequences in the step.
//
// Either way the result depends on that token's query, its sequence's cache
// and (f16) its sequence's row count alone, not on the rest of the batch or
// the thread count. Work is split over (token, query head) pairs; the pairs
// of one kv head that a thread holds are attended in chunks of up to 8 that
// read each key and value row (in place on an f16 cache, else converted)
// once together, each pair's arithmetic unchanged: the query heads of one
// token's group, and on an f16 cache also the next tokens' of the same
// sequence that see from the same first position.
//
// Every index is checked before any work: seq_starts must run from 0 to
// tokens without decreasing, each position must be below its sequence's
// context length, context lengths within the block table's capacity, and the
// blocks they use within the pool. Errors are InvalidArgument / OutOfRange.
absl::Status PagedAttention(const float* query, int64_t tokens, int64_t heads, const PagedKvLayout& layout,
                            int64_t layer, const uint8_t* kv_pool, int64_t num_blocks,
                            const PagedAttentionBatch& batch, float scale, int64_t window, float softcap,
                            float* out, ThreadPool& pool);

}  // namespace kvjit::cpu

#endif  // KVJIT_RUNTIME_CPU_PAGEDATTENTION_H_
