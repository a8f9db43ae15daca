#ifndef KVJIT_IR_REFERENCE_REFCACHEROUNDING_H_
#define KVJIT_IR_REFERENCE_REFCACHEROUNDING_H_

#include <cstdint>

#include "ir/Kv/KvAttrs.h"

namespace kvjit::reference {

// Replaces each of a head's head_dim keys or values by the value a cache of
// `element` gives back for it, as runtime/schema/KvCacheFormat.h defines the
// encoding: written from that definition, apart from the runtime's kernels,
// so the two can be checked against each other.
void RoundAsCacheStores(kv::CacheElement element, float* head_row, int64_t head_dim);

// Multiplies each of a head's head_dim / block blocks by the orthonormal
// Walsh-Hadamard matrix of `block` elements (a power of two), computed
// entry by entry in double: H[i][j] = (-1)^popcount(i & j) / sqrt(block).
void RotateAsCacheStores(float* head_row, int64_t head_dim, int64_t block);

}  // namespace kvjit::reference

#endif  // KVJIT_IR_REFERENCE_REFCACHEROUNDING_H_
