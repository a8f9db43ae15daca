#ifndef KVJIT_RUNTIME_CPU_KVCACHEROWS_H_
#define KVJIT_RUNTIME_CPU_KVCACHEROWS_H_

// A head's keys or values as the paged KV pool stores them, in each element
// type of runtime/schema/KvCacheFormat.h: written from f32 when a step's
// keys and values enter the cache, read back as f32 by attention.

#include <cstdint>

#include "runtime/schema/kvx_generated.h"

namespace kvjit::cpu {

// The bytes `n` elements of `type` take; n must be a whole number of its
// blocks (the layout's verifier holds head_dim to that).
int64_t KvRowBytes(kvx::StorageType type, int64_t n);

// Stores x[0..n) as `type` at out (KvCacheFormat.h's encoding: f16, bf16 and
// the E4M3 codes rounded to nearest even; q8_0 and q4_0 as llama.cpp's CPU
// backend quantizes a row for its cache, so the stored bytes are the same).
void StoreKvRow(kvx::StorageType type, const float* x, int64_t n, uint8_t* out);

// The f32 values of n elements of `type` at `in` (the blocked types: scale
// times code, one f32 multiply each).
void LoadKvRow(kvx::StorageType type, const uint8_t* in, int64_t n, float* out);
// LoadKvRow without the x86 forms it picks where the CPU has them, for tests
// (the results are the same bits).
void PortableLoadKvRow(kvx::StorageType type, const uint8_t* in, int64_t n, float* out);

// Multiplies each of the n / block consecutive blocks of x by the
// orthonormal Walsh-Hadamard matrix of `block` elements (a power of two),
// in place: a butterfly of sums and differences, then the scale 1/sqrt(block).
void RotateHadamard(float* x, int64_t n, int64_t block);

// The value of an OCP FP8 E4M3FN code (the two NaN codes give NaN).
float E4m3ToFloat(uint8_t code);
// x as the nearest E4M3FN code (ties to even), saturated to ±448.
uint8_t FloatToE4m3(float x);

}  // namespace kvjit::cpu

#endif  // KVJIT_RUNTIME_CPU_KVCACHEROWS_H_
