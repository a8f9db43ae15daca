#ifndef KVJIT_RUNTIME_SCHEMA_KVCACHEFORMAT_H_
#define KVJIT_RUNTIME_SCHEMA_KVCACHEFORMAT_H_

// The element types a KV cache can hold and how each stores a slot's keys or
// values: the compiler sizes blocks from this table (plan-memory), the
// runtime checks an executable's KvLayout against it and its kernels read
// and write the bytes it describes. Plain C++ over the generated schema.
//
// A slot's keys (or values) are kv_heads × head_dim elements, head after
// head. The element types store them as:
//   f32, f16, bf16  each element in 4 or 2 bytes (f16: IEEE binary16; bf16:
//                   the upper half of an f32), rounded to nearest even;
//   q8_0            blocks of 32 consecutive elements of one head, each an
//                   f16 scale d then 32 int8 q: x = d·q, d = max|x| / 127
//                   (ggml's block_q8_0, byte for byte);
//   q4_0            blocks of 32: an f16 scale d then 16 bytes whose low
//                   nibbles hold elements 0..15 and high nibbles 16..31,
//                   each n: x = d·(n − 8), d = the element of largest
//                   magnitude / −8 (ggml's block_q4_0, byte for byte);
//   f8_e4m3         blocks of 32: an f16 scale d then 32 OCP E4M3FN codes c:
//                   x = d·e4m3(c), d = max|x| / 448, the largest finite
//                   E4M3 value, so the block's largest element is exact in
//                   range and none saturates.
// The blocked types need head_dim to be a multiple of 32.
//
// A cache may also hold its keys (values) rotated: each head's elements, in
// consecutive blocks of R (a power of two dividing head_dim), multiplied by
// the orthonormal Walsh-Hadamard matrix H_R (Sylvester's order, scaled by
// 1/sqrt(R); H_R is its own inverse). Attention then rotates each query head
// by the keys' H_R (scores are unchanged, as H_R is orthonormal) and its
// output by the values' H_R. The rotation spreads a head's outlier channels
// over its block before quantization sees them, as llama.cpp does for its
// quantized caches; the choice of R below is llama.cpp's.
//
// Attention scores over q8_0 and q4_0 keys are integer dot products, as
// ggml's vec_dot for those types computes them: each (rotated) query head is
// first quantized to q8_0 blocks by the rule above, so a score is
// Σ_blocks d_key·d_query·Σ q_key·q_query. query_type names that rounding
// (F32: the query is used as it is).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "runtime/schema/kvx_generated.h"

namespace kvjit::kvx {

struct KvCacheFormat {
  StorageType type;
  const char* name;  // as --cache_dtype and insert-kv-cache{cache-dtype=} spell it
  int64_t elements_per_block;
  int64_t bytes_per_block;
  StorageType query_type;  // what a query is rounded to before its dot product with these keys
};

inline constexpr int64_t kKvCacheBlockElements = 32;

inline constexpr KvCacheFormat kKvCacheFormats[] = {
    {StorageType::F32, "f32", 1, 4, StorageType::F32},
    {StorageType::F16, "f16", 1, 2, StorageType::F32},
    {StorageType::BF16, "bf16", 1, 2, StorageType::F32},
    {StorageType::Q8_0, "q8_0", kKvCacheBlockElements, 2 + kKvCacheBlockElements, StorageType::Q8_0},
    {StorageType::Q4_0, "q4_0", kKvCacheBlockElements, 2 + kKvCacheBlockElements / 2, StorageType::Q8_0},
    {StorageType::F8_E4M3, "f8_e4m3", kKvCacheBlockElements, 2 + kKvCacheBlockElements, StorageType::F32},
};

// The names of kKvCacheFormats, comma-separated, for messages.
inline constexpr const char* kKvCacheFormatNames = "f32, f16, bf16, q8_0, q4_0, f8_e4m3";

constexpr const KvCacheFormat* FindKvCacheFormat(StorageType type) {
  for (const KvCacheFormat& format : kKvCacheFormats) {
    if (format.type == type) return &format;
  }
  return nullptr;
}

constexpr const KvCacheFormat* FindKvCacheFormat(std::string_view name) {
  for (const KvCacheFormat& format : kKvCacheFormats) {
    if (std::string_view(format.name) == name) return &format;
  }
  return nullptr;
}

// Whether `type` stores blocks with a scale each (and so gains from rotation).
constexpr bool IsBlockQuantized(StorageType type) {
  const KvCacheFormat* format = FindKvCacheFormat(type);
  return format != nullptr && format->elements_per_block > 1;
}

// Whether scores over keys of `type` quantize the query to q8_0 first.
constexpr bool QuantizesQuery(StorageType type) {
  const KvCacheFormat* format = FindKvCacheFormat(type);
  return format != nullptr && format->query_type == StorageType::Q8_0;
}

// The rotation block of quantized keys: the largest power of two of at
// least 64 dividing head_dim; 0 (none) where 64 does not divide it.
constexpr int64_t KeyRotationBlock(int64_t head_dim) {
  if (head_dim <= 0 || head_dim % 64 != 0) return 0;
  int64_t block = 64;
  while (head_dim % (2 * block) == 0) block *= 2;
  return block;
}

// The rotation block of quantized values: 64 where it divides head_dim.
constexpr int64_t ValueRotationBlock(int64_t head_dim) { return head_dim > 0 && head_dim % 64 == 0 ? 64 : 0; }

// Whether `block` is a rotation a head of head_dim elements can have: 0, or a
// power of two of at least 2 dividing head_dim.
constexpr bool IsValidRotation(int64_t block, int64_t head_dim) {
  return block == 0 || (block >= 2 && (block & (block - 1)) == 0 && head_dim % block == 0);
}

// A cache's types as messages and reports name them: "q8_0" for keys and
// values alike, "q8_0/f16" for q8_0 keys and f16 values.
inline std::string KvCacheTypesName(StorageType key, StorageType value) {
  const KvCacheFormat* keys = FindKvCacheFormat(key);
  const KvCacheFormat* values = FindKvCacheFormat(value);
  const std::string key_name = keys ? keys->name : EnumNameStorageType(key);
  const std::string value_name = values ? values->name : EnumNameStorageType(value);
  return key == value ? key_name : key_name + "/" + value_name;
}

// The bytes of one slot's keys or values: kv_heads × head_dim elements of
// `format`; nullopt where head_dim is not a whole number of its blocks or the
// size overflows.
constexpr std::optional<uint64_t> KvSlotBytes(const KvCacheFormat& format, uint64_t kv_heads,
                                              uint64_t head_dim) {
  if (head_dim % static_cast<uint64_t>(format.elements_per_block) != 0) return std::nullopt;
  const uint64_t blocks_per_head = head_dim / static_cast<uint64_t>(format.elements_per_block);
  uint64_t blocks = 0;
  uint64_t bytes = 0;
  if (__builtin_mul_overflow(blocks_per_head, kv_heads, &blocks) ||
      __builtin_mul_overflow(blocks, static_cast<uint64_t>(format.bytes_per_block), &bytes)) {
    return std::nullopt;
  }
  return bytes;
}

}  // namespace kvjit::kvx

#endif  // KVJIT_RUNTIME_SCHEMA_KVCACHEFORMAT_H_
