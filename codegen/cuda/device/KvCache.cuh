// Device code: the KV cache's element types (runtime/schema/KvCacheFormat.h)
// stored from f32 and loaded back, and the Walsh-Hadamard rotation of
// rotated caches. Embedded verbatim into every generated translation unit
// (codegen/cuda/DevicePrelude.cpp) after Dequant.cuh, whose load_half it
// uses; the host emulation (codegen/cuda/emulation) runs it as it is.
//
// Each store computes what runtime/cpu/KvCacheRows.cpp's StoreKvRow
// computes, operation for operation, with rounded multiplies, divides and
// adds (never fused, whatever --use_fast_math says), so that the bytes a
// kernel writes are the CPU's:
//   bf16     nearest even, NaNs kept quiet (quant::FloatToBFloat16);
//   q8_0     d = max|x| / 127 stored as f16, q = rint(x · (127 / max|x|))
//            (ggml's x86 quantize_row_q8_0, the CPU's QuantizeQ8Blocks32);
//   q4_0     d = (the element of largest magnitude, the first such) / −8,
//            n = min(15, trunc(x · (1 / d) + 8.5)) (ggml's
//            quantize_row_q4_0_ref);
//   f8_e4m3  d = max|x| / 448, codes of x · (448 / max|x|) rounded to
//            nearest even and saturated to ±448 (the CPU's FloatToE4m3).
// A 32-element block is quantized by the 32 lanes of one warp, lane j
// holding element j: the block's largest magnitude is a __shfl_xor_sync
// reduction (max is exact in any order), so every lane gets the same scale.
// Loads are the scale times the code's value, one f32 multiply, as
// LoadKvRow; round_q8_0 gives a query element back as a q8_0 block would
// (for q8_0 and q4_0 keys, which the CPU scores against a q8_0 query).

// ---- Element conversions.

// Rounds to nearest even; NaNs stay NaN (quiet), as quant::FloatToBFloat16.
KVJIT_DEVICE uint16_t float_to_bf16(float value) {
  const uint32_t bits = __float_as_uint(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40u);
  const uint32_t kept = bits >> 16, dropped = bits & 0xffffu;
  return static_cast<uint16_t>(kept + ((dropped > 0x8000u || (dropped == 0x8000u && (kept & 1u))) ? 1u : 0u));
}

// The value of an OCP E4M3FN code: a normal code's exponent and mantissa
// moved into an f32's, a subnormal's (exponent 0) its mantissa times 2^-9;
// 0x7f and 0xff are NaN.
KVJIT_DEVICE float e4m3_to_float(uint32_t code) {
  const uint32_t magnitude = code & 0x7fu;
  float value;
  if (magnitude == 0x7fu) {
    value = __uint_as_float(0x7fc00000u);
  } else if (magnitude < 8u) {
    value = __fmul_rn(static_cast<float>(magnitude), 0.001953125f);
  } else {
    value = __uint_as_float((magnitude << 20) + ((127u - 7u) << 23));
  }
  return (code & 0x80u) ? -value : value;
}

// x as the nearest E4M3FN code, ties to even, saturated to ±448 (NaN too),
// as the CPU's FloatToE4m3.
KVJIT_DEVICE uint32_t float_to_e4m3(float x) {
  const uint32_t bits = __float_as_uint(x);
  const uint32_t sign = (bits >> 24) & 0x80u;
  const float magnitude = fabsf(x);
  if (!(magnitude < 448.0f)) return sign | 0x7eu;
  // Below the smallest normal (2^-6) the codes step by 2^-9 (an exact multiply).
  if (magnitude < 0.015625f) return sign | static_cast<uint32_t>(rintf(__fmul_rn(magnitude, 512.0f)));
  const uint32_t m = bits & 0x7fffffffu;
  const uint32_t kept = m >> 20, dropped = m & 0xfffffu;
  const uint32_t rounded = kept + ((dropped > 0x80000u || (dropped == 0x80000u && (kept & 1u))) ? 1u : 0u);
  const uint32_t code = rounded - ((127u - 7u) << 3);
  return sign | (code < 0x7eu ? code : 0x7eu);
}

KVJIT_DEVICE void store_u16(uint8_t* p, uint32_t bits) {
  p[0] = static_cast<uint8_t>(bits & 0xffu);
  p[1] = static_cast<uint8_t>((bits >> 8) & 0xffu);
}

// ---- Elementwise types: element d of a head (or slot) row.

KVJIT_DEVICE float load_kv_f32(const uint8_t* row, int d) { return reinterpret_cast<const float*>(row)[d]; }
KVJIT_DEVICE float load_kv_f16(const uint8_t* row, int d) {
  return half_to_float(reinterpret_cast<const uint16_t*>(row)[d]);
}
KVJIT_DEVICE float load_kv_bf16(const uint8_t* row, int d) {
  return bf16_to_float(reinterpret_cast<const uint16_t*>(row)[d]);
}
KVJIT_DEVICE void store_kv_f32(uint8_t* row, int d, float x) { reinterpret_cast<float*>(row)[d] = x; }
KVJIT_DEVICE void store_kv_f16(uint8_t* row, int d, float x) {
  reinterpret_cast<uint16_t*>(row)[d] = float_to_half(x);
}
KVJIT_DEVICE void store_kv_bf16(uint8_t* row, int d, float x) {
  reinterpret_cast<uint16_t*>(row)[d] = float_to_bf16(x);
}

// ---- Blocked types: element d of a head row of 34- or 18-byte blocks.

KVJIT_DEVICE float load_kv_q8_0(const uint8_t* row, int d) {
  const uint8_t* block = row + (d >> 5) * 34;
  return __fmul_rn(load_half(block), static_cast<float>(static_cast<int8_t>(block[2 + (d & 31)])));
}

KVJIT_DEVICE float load_kv_q4_0(const uint8_t* row, int d) {
  const uint8_t* block = row + (d >> 5) * 18;
  const int j = d & 31;
  const int byte = block[2 + (j & 15)];
  const int nibble = j < 16 ? (byte & 0x0f) : (byte >> 4);
  return __fmul_rn(load_half(block), static_cast<float>(nibble - 8));
}

KVJIT_DEVICE float load_kv_f8_e4m3(const uint8_t* row, int d) {
  const uint8_t* block = row + (d >> 5) * 34;
  return __fmul_rn(load_half(block), e4m3_to_float(block[2 + (d & 31)]));
}

KVJIT_DEVICE float warp_max(float value) {
  for (int offset = 16; offset > 0; offset >>= 1) {
    value = fmaxf(value, __shfl_xor_sync(0xffffffffu, value, offset));
  }
  return value;
}

// Each store_block_<type>(block, x, lane) is called by all 32 lanes of a
// warp, lane j with element j of the block.

KVJIT_DEVICE void store_block_q8_0(uint8_t* block, float x, int lane) {
  const float amax = warp_max(fabsf(x));
  const float d = __fdiv_rn(amax, 127.0f);
  const float inverse = amax != 0.0f ? __fdiv_rn(127.0f, amax) : 0.0f;
  const int q = __float2int_rn(__fmul_rn(x, inverse));
  block[2 + lane] = static_cast<uint8_t>(static_cast<int8_t>(q));
  if (lane == 0) store_u16(block, float_to_half(d));
}

KVJIT_DEVICE void store_block_q4_0(uint8_t* block, float x, int lane) {
  // The element of largest magnitude, the first of equals: (magnitude,
  // index, value) folded so that every lane ends with the same triple.
  float amax = fabsf(x), max = x, index = static_cast<float>(lane);
  for (int offset = 16; offset > 0; offset >>= 1) {
    const float other_amax = __shfl_xor_sync(0xffffffffu, amax, offset);
    const float other_max = __shfl_xor_sync(0xffffffffu, max, offset);
    const float other_index = __shfl_xor_sync(0xffffffffu, index, offset);
    if (other_amax > amax || (other_amax == amax && other_index < index)) {
      amax = other_amax;
      max = other_max;
      index = other_index;
    }
  }
  if (!(amax > 0.0f)) max = 0.0f;  // the CPU's max starts at +0 and stays there
  const float d = __fdiv_rn(max, -8.0f);
  const float inverse = d != 0.0f ? __fdiv_rn(1.0f, d) : 0.0f;
  const int truncated = static_cast<int>(__fadd_rn(__fmul_rn(x, inverse), 8.5f));
  const int nibble = truncated < 15 ? truncated : 15;
  const int high = static_cast<int>(__shfl_xor_sync(0xffffffffu, static_cast<float>(nibble), 16));
  if (lane < 16) block[2 + lane] = static_cast<uint8_t>(nibble | (high << 4));
  if (lane == 0) store_u16(block, float_to_half(d));
}

KVJIT_DEVICE void store_block_f8_e4m3(uint8_t* block, float x, int lane) {
  const float amax = warp_max(fabsf(x));
  const float d = __fdiv_rn(amax, 448.0f);
  const float multiplier = amax != 0.0f ? __fdiv_rn(448.0f, amax) : 0.0f;
  block[2 + lane] = static_cast<uint8_t>(float_to_e4m3(__fmul_rn(x, multiplier)));
  if (lane == 0) store_u16(block, float_to_half(d));
}

// x as a q8_0 block gives it back (LoadKvRow of StoreKvRow): the f16
// scale times the code. Attention rounds each query head so where the keys
// are q8_0 or q4_0 (KvCacheFormat.h's QuantizesQuery), as the CPU's integer
// dot products and the reference see the query. Called by all 32 lanes of a
// warp, lane j with element j of the block.
KVJIT_DEVICE float round_q8_0(float x) {
  const float amax = warp_max(fabsf(x));
  const float d = half_to_float(float_to_half(__fdiv_rn(amax, 127.0f)));
  const float inverse = amax != 0.0f ? __fdiv_rn(127.0f, amax) : 0.0f;
  return __fmul_rn(d, static_cast<float>(__float2int_rn(__fmul_rn(x, inverse))));
}

// ---- Walsh-Hadamard rotation (runtime/cpu/KvCacheRows.cpp RotateHadamard):
// each block of `block` consecutive elements (a power of two) multiplied by
// the orthonormal H: butterflies of sums and differences, half = 1, 2, 4, ..,
// then each element times `scale` (1/sqrt(block), as the CPU rounds it), the
// CPU's operations in its order, so the same bits.

// x[0..n) in shared memory, n a multiple of `block`; every thread of the
// block calls it, and all see the result.
KVJIT_DEVICE void hadamard_shared(float* x, int n, int block, float scale) {
  for (int half = 1; half < block; half *= 2) {
    __syncthreads();
    for (int p = threadIdx.x; p < n / 2; p += blockDim.x) {
      const int j = (p / half) * 2 * half + p % half;
      const float a = x[j], b = x[j + half];
      x[j] = __fadd_rn(a, b);
      x[j + half] = __fsub_rn(a, b);
    }
  }
  __syncthreads();
  for (int i = threadIdx.x; i < n; i += blockDim.x) x[i] = __fmul_rn(x[i], scale);
  __syncthreads();
}

// A head held by a warp, v[c] = element lane + 32c (0 past the head):
// butterflies below 32 pair lanes by shuffles, the rest pair registers.
// Every lane of the warp calls it.
template <int kBlock, int kDimsPerLane>
KVJIT_DEVICE void hadamard_lanes(float (&v)[kDimsPerLane], float scale) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int half = 1; half < kBlock; half *= 2) {
    if (half < 32) {
#pragma unroll
      for (int c = 0; c < kDimsPerLane; ++c) {
        const float partner = __shfl_xor_sync(0xffffffffu, v[c], half);
        v[c] = (lane & half) ? __fsub_rn(partner, v[c]) : __fadd_rn(v[c], partner);
      }
    } else {
      const int stride = half / 32;
#pragma unroll
      for (int c = 0; c < kDimsPerLane; ++c) {
        if ((c & stride) != 0 || c + stride >= kDimsPerLane) continue;
        const float a = v[c], b = v[c + stride];
        v[c] = __fadd_rn(a, b);
        v[c + stride] = __fsub_rn(a, b);
      }
    }
  }
#pragma unroll
  for (int c = 0; c < kDimsPerLane; ++c) v[c] = __fmul_rn(v[c], scale);
}
