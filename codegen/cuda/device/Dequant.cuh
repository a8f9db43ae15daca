// Device code: weight rows in their storage type to f32, in groups of 32
// elements. Embedded verbatim into every generated translation unit
// (codegen/cuda/DevicePrelude.cpp), after KVJIT_DEVICE, the fixed-width
// integer types, half_to_float and bf16_to_float; the host test
// tests/unit/codegen/cuda/DequantDeviceCodeTest.cpp compiles it too.
//
// dequant_<type>(row, group, cols, out) writes elements 32 * group .. + 31
// of a row of `cols` elements (0 past `cols`). The arithmetic mirrors
// runtime/quant/Dequantize.cpp operation for operation, with rounded
// multiplies and adds (never fused), so that kernels see the weights the CPU
// runtime sees, bit for bit.

// Quantized blocks are packed at byte granularity (18, 20, 34, 210 bytes):
// their fields are read byte by byte.
KVJIT_DEVICE uint32_t load_u16(const uint8_t* p) { return p[0] | (p[1] << 8); }
KVJIT_DEVICE float load_half(const uint8_t* p) {
  return half_to_float(static_cast<uint16_t>(load_u16(p)));
}
KVJIT_DEVICE uint32_t load_u32(const uint8_t* p) {
  return p[0] | (p[1] << 8) | (p[2] << 16) | (static_cast<uint32_t>(p[3]) << 24);
}

KVJIT_DEVICE void dequant_f32(const uint8_t* row, int group, int cols, float* out) {
  const float* values = reinterpret_cast<const float*>(row);
  for (int j = 0; j < 32; ++j) {
    const int i = group * 32 + j;
    out[j] = i < cols ? values[i] : 0.0f;
  }
}

KVJIT_DEVICE void dequant_f16(const uint8_t* row, int group, int cols, float* out) {
  const uint16_t* values = reinterpret_cast<const uint16_t*>(row);
  for (int j = 0; j < 32; ++j) {
    const int i = group * 32 + j;
    out[j] = i < cols ? half_to_float(values[i]) : 0.0f;
  }
}

KVJIT_DEVICE void dequant_bf16(const uint8_t* row, int group, int cols, float* out) {
  const uint16_t* values = reinterpret_cast<const uint16_t*>(row);
  for (int j = 0; j < 32; ++j) {
    const int i = group * 32 + j;
    out[j] = i < cols ? bf16_to_float(values[i]) : 0.0f;
  }
}

// Q8_0: f16 d, int8 q[32]; x = q * d.
KVJIT_DEVICE void dequant_q8_0(const uint8_t* row, int group, int, float* out) {
  const uint8_t* block = row + group * 34;
  const float d = load_half(block);
  for (int j = 0; j < 32; ++j) out[j] = __fmul_rn(static_cast<float>(static_cast<int8_t>(block[2 + j])), d);
}

// Q4_0: f16 d, nibbles (low: elements 0..15, high: 16..31); x = (q - 8) * d.
KVJIT_DEVICE void dequant_q4_0(const uint8_t* row, int group, int, float* out) {
  const uint8_t* block = row + group * 18;
  const float d = load_half(block);
  const uint8_t* qs = block + 2;
  for (int j = 0; j < 16; ++j) {
    out[j] = __fmul_rn(static_cast<float>((qs[j] & 0x0f) - 8), d);
    out[j + 16] = __fmul_rn(static_cast<float>((qs[j] >> 4) - 8), d);
  }
}

// Q4_1: f16 d, f16 m, nibbles as Q4_0; x = q * d + m.
KVJIT_DEVICE void dequant_q4_1(const uint8_t* row, int group, int, float* out) {
  const uint8_t* block = row + group * 20;
  const float d = load_half(block);
  const float m = load_half(block + 2);
  const uint8_t* qs = block + 4;
  for (int j = 0; j < 16; ++j) {
    out[j] = __fadd_rn(__fmul_rn(static_cast<float>(qs[j] & 0x0f), d), m);
    out[j + 16] = __fadd_rn(__fmul_rn(static_cast<float>(qs[j] >> 4), d), m);
  }
}

// Q5_0: f16 d, u32 qh (bit i: the fifth bit of element i), nibbles as Q4_0;
// x = (q - 16) * d.
KVJIT_DEVICE void dequant_q5_0(const uint8_t* row, int group, int, float* out) {
  const uint8_t* block = row + group * 22;
  const float d = load_half(block);
  const uint32_t qh = load_u32(block + 2);
  const uint8_t* qs = block + 6;
  for (int j = 0; j < 16; ++j) {
    const int low = (qs[j] & 0x0f) | (((qh >> j) & 1) << 4);
    const int high = (qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4);
    out[j] = __fmul_rn(static_cast<float>(low - 16), d);
    out[j + 16] = __fmul_rn(static_cast<float>(high - 16), d);
  }
}

// Q5_1: f16 d, f16 m, u32 qh, nibbles; x = q * d + m.
KVJIT_DEVICE void dequant_q5_1(const uint8_t* row, int group, int, float* out) {
  const uint8_t* block = row + group * 24;
  const float d = load_half(block);
  const float m = load_half(block + 2);
  const uint32_t qh = load_u32(block + 4);
  const uint8_t* qs = block + 8;
  for (int j = 0; j < 16; ++j) {
    const int low = (qs[j] & 0x0f) | (((qh >> j) & 1) << 4);
    const int high = (qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4);
    out[j] = __fadd_rn(__fmul_rn(static_cast<float>(low), d), m);
    out[j + 16] = __fadd_rn(__fmul_rn(static_cast<float>(high), d), m);
  }
}

// The 6-bit scale and min of sub-block j of a Q4_K / Q5_K super-block.
KVJIT_DEVICE void unpack_scale_min(const uint8_t* packed, int j, int* scale, int* min) {
  if (j < 4) {
    *scale = packed[j] & 63;
    *min = packed[j + 4] & 63;
  } else {
    *scale = (packed[j + 4] & 0x0f) | ((packed[j - 4] >> 6) << 4);
    *min = (packed[j + 4] >> 4) | ((packed[j] >> 6) << 4);
  }
}

// Q4_K: super-blocks of 256 (f16 d, f16 dmin, 12 bytes of scales, 128 of
// nibbles); sub-block s of 32 takes the low (even s) or high (odd s)
// nibbles of bytes 32 * (s / 2) ..; x = d * scale * q - dmin * min.
KVJIT_DEVICE void dequant_q4_k(const uint8_t* row, int group, int, float* out) {
  const uint8_t* block = row + (group / 8) * 144;
  const int sub = group % 8;
  int scale, min;
  unpack_scale_min(block + 4, sub, &scale, &min);
  const float d = __fmul_rn(load_half(block), static_cast<float>(scale));
  const float m = __fmul_rn(load_half(block + 2), static_cast<float>(min));
  const uint8_t* qs = block + 16 + 32 * (sub / 2);
  const int shift = (sub & 1) * 4;
  for (int j = 0; j < 32; ++j) {
    out[j] = __fsub_rn(__fmul_rn(d, static_cast<float>((qs[j] >> shift) & 0x0f)), m);
  }
}

// Q5_K: Q4_K with 32 bytes of fifth bits (bit s of qh[j] tops element j of
// sub-block s) before the nibbles.
KVJIT_DEVICE void dequant_q5_k(const uint8_t* row, int group, int, float* out) {
  const uint8_t* block = row + (group / 8) * 176;
  const int sub = group % 8;
  int scale, min;
  unpack_scale_min(block + 4, sub, &scale, &min);
  const float d = __fmul_rn(load_half(block), static_cast<float>(scale));
  const float m = __fmul_rn(load_half(block + 2), static_cast<float>(min));
  const uint8_t* qh = block + 16;
  const uint8_t* qs = block + 48 + 32 * (sub / 2);
  const int shift = (sub & 1) * 4;
  for (int j = 0; j < 32; ++j) {
    const int q = ((qs[j] >> shift) & 0x0f) + (((qh[j] >> sub) & 1) ? 16 : 0);
    out[j] = __fsub_rn(__fmul_rn(d, static_cast<float>(q)), m);
  }
}

// Q6_K: super-blocks of 256 (ql[128], qh[64], int8 scales[16], f16 d), in
// halves of 128; element j of quarter k of a half takes its low bits from
// ql[j + 32 * (k & 1)] (low nibble for k < 2) and its high bits from bits
// 2k, 2k + 1 of qh[j]; x = d * scale * (q - 32), a scale per 16 elements.
KVJIT_DEVICE void dequant_q6_k(const uint8_t* row, int group, int, float* out) {
  const uint8_t* block = row + (group / 8) * 210;
  const int half = (group % 8) / 4, quarter = group % 4;
  const uint8_t* ql = block + 64 * half + 32 * (quarter & 1);
  const uint8_t* qh = block + 128 + 32 * half;
  const int8_t* scales = reinterpret_cast<const int8_t*>(block + 192 + 8 * half);
  const float d = load_half(block + 208);
  const int low_shift = quarter < 2 ? 0 : 4;
  for (int j = 0; j < 32; ++j) {
    const int q = (((ql[j] >> low_shift) & 0x0f) | (((qh[j] >> (2 * quarter)) & 3) << 4)) - 32;
    const float scale = static_cast<float>(scales[j / 16 + 2 * quarter]);
    out[j] = __fmul_rn(__fmul_rn(d, scale), static_cast<float>(q));
  }
}
