#include "runtime/quant/Dequantize.h"

#include <array>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "runtime/quant/Half.h"

namespace kvjit::quant {
namespace {

// The arithmetic mirrors ggml's reference dequantization (same operations in
// the same order), so results match llama.cpp bit for bit.

uint16_t LoadU16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }

uint32_t LoadU32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
         (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
}

float LoadHalf(const uint8_t* p) { return HalfToFloat(LoadU16(p)); }

// Q8_0: f16 d, int8 q[32]; x = q * d.
void DequantizeQ8_0(const uint8_t* block, float* out) {
  const float d = LoadHalf(block);
  for (int i = 0; i < 32; ++i) out[i] = static_cast<int8_t>(block[2 + i]) * d;
}

// Q4_0: f16 d, 16 bytes of nibbles; the low nibbles are elements 0..15, the
// high nibbles 16..31; x = (q - 8) * d.
void DequantizeQ4_0(const uint8_t* block, float* out) {
  const float d = LoadHalf(block);
  const uint8_t* qs = block + 2;
  for (int i = 0; i < 16; ++i) {
    out[i] = ((qs[i] & 0x0f) - 8) * d;
    out[i + 16] = ((qs[i] >> 4) - 8) * d;
  }
}

// Q4_1: f16 d, f16 m, nibbles as Q4_0; x = q * d + m.
void DequantizeQ4_1(const uint8_t* block, float* out) {
  const float d = LoadHalf(block);
  const float m = LoadHalf(block + 2);
  const uint8_t* qs = block + 4;
  for (int i = 0; i < 16; ++i) {
    out[i] = (qs[i] & 0x0f) * d + m;
    out[i + 16] = (qs[i] >> 4) * d + m;
  }
}

// Bit i of the 32-bit `qh` is the fifth bit of element i.
int FifthBit(uint32_t qh, int element) { return ((qh >> element) & 1) << 4; }

// Q5_0: f16 d, u32 qh, nibbles as Q4_0; x = (q - 16) * d.
void DequantizeQ5_0(const uint8_t* block, float* out) {
  const float d = LoadHalf(block);
  const uint32_t qh = LoadU32(block + 2);
  const uint8_t* qs = block + 6;
  for (int i = 0; i < 16; ++i) {
    out[i] = (((qs[i] & 0x0f) | FifthBit(qh, i)) - 16) * d;
    out[i + 16] = (((qs[i] >> 4) | FifthBit(qh, i + 16)) - 16) * d;
  }
}

// Q5_1: f16 d, f16 m, u32 qh, nibbles as Q4_0; x = q * d + m.
void DequantizeQ5_1(const uint8_t* block, float* out) {
  const float d = LoadHalf(block);
  const float m = LoadHalf(block + 2);
  const uint32_t qh = LoadU32(block + 4);
  const uint8_t* qs = block + 8;
  for (int i = 0; i < 16; ++i) {
    out[i] = ((qs[i] & 0x0f) | FifthBit(qh, i)) * d + m;
    out[i + 16] = ((qs[i] >> 4) | FifthBit(qh, i + 16)) * d + m;
  }
}

// The 6-bit scale and min of sub-block j (0..7) packed in Q4_K's and Q5_K's 12
// bytes: sub-blocks 0..3 sit in the low 6 bits of bytes j and j + 4; 4..7 keep
// their low 4 bits in byte j + 4 (scale low nibble, min high nibble) and their
// top 2 bits in the spare top bits of bytes j - 4 (scale) and j (min).
struct ScaleMin {
  int scale;
  int min;
};

ScaleMin UnpackScaleMin(const uint8_t* packed, int j) {
  if (j < 4) return {packed[j] & 63, packed[j + 4] & 63};
  return {(packed[j + 4] & 0x0f) | ((packed[j - 4] >> 6) << 4), (packed[j + 4] >> 4) | ((packed[j] >> 6) << 4)};
}

// Q4_K: f16 d, f16 dmin, 12 bytes of scales, 128 bytes of nibbles. Each 64
// elements take 32 bytes: low nibbles first (one sub-block), then high
// nibbles (the next); x = d * scale * q - dmin * min.
void DequantizeQ4_K(const uint8_t* block, float* out) {
  const float d = LoadHalf(block);
  const float dmin = LoadHalf(block + 2);
  const uint8_t* scales = block + 4;
  const uint8_t* qs = block + 16;
  for (int group = 0; group < 4; ++group) {
    const ScaleMin low = UnpackScaleMin(scales, 2 * group);
    const ScaleMin high = UnpackScaleMin(scales, 2 * group + 1);
    const float d_low = d * low.scale, m_low = dmin * low.min;
    const float d_high = d * high.scale, m_high = dmin * high.min;
    for (int l = 0; l < 32; ++l) out[l] = d_low * (qs[l] & 0x0f) - m_low;
    for (int l = 0; l < 32; ++l) out[32 + l] = d_high * (qs[l] >> 4) - m_high;
    qs += 32;
    out += 64;
  }
}

// Q5_K: as Q4_K with 32 bytes of fifth bits (qh) before the nibbles: for the
// 64 elements of group g, bit 2g of qh[l] tops element l, bit 2g+1 element 32+l.
void DequantizeQ5_K(const uint8_t* block, float* out) {
  const float d = LoadHalf(block);
  const float dmin = LoadHalf(block + 2);
  const uint8_t* scales = block + 4;
  const uint8_t* qh = block + 16;
  const uint8_t* qs = block + 48;
  for (int group = 0; group < 4; ++group) {
    const ScaleMin low = UnpackScaleMin(scales, 2 * group);
    const ScaleMin high = UnpackScaleMin(scales, 2 * group + 1);
    const float d_low = d * low.scale, m_low = dmin * low.min;
    const float d_high = d * high.scale, m_high = dmin * high.min;
    const uint8_t low_bit = static_cast<uint8_t>(1u << (2 * group));
    const uint8_t high_bit = static_cast<uint8_t>(2u << (2 * group));
    for (int l = 0; l < 32; ++l) out[l] = d_low * ((qs[l] & 0x0f) + ((qh[l] & low_bit) ? 16 : 0)) - m_low;
    for (int l = 0; l < 32; ++l) out[32 + l] = d_high * ((qs[l] >> 4) + ((qh[l] & high_bit) ? 16 : 0)) - m_high;
    qs += 32;
    out += 64;
  }
}

// Q6_K: ql[128] (low 4 bits), qh[64] (high 2 bits), int8 scales[16] (one per
// 16 elements), f16 d; x = d * scale * (q - 32). Each half of 128 elements
// takes 64 bytes of ql and 32 of qh: element l (l < 32) of quarter k gets its
// low bits from ql[l + 32 * (k & 1)] (low nibble for k < 2, high otherwise)
// and its high bits from bits 2k..2k+1 of qh[l].
void DequantizeQ6_K(const uint8_t* block, float* out) {
  const uint8_t* ql = block;
  const uint8_t* qh = block + 128;
  const int8_t* scales = reinterpret_cast<const int8_t*>(block + 192);
  const float d = LoadHalf(block + 208);
  for (int half = 0; half < 2; ++half) {
    for (int l = 0; l < 32; ++l) {
      const int sub = l / 16;
      const int q1 = ((ql[l] & 0x0f) | (((qh[l] >> 0) & 3) << 4)) - 32;
      const int q2 = ((ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4)) - 32;
      const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
      const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
      out[l] = d * scales[sub] * q1;
      out[l + 32] = d * scales[sub + 2] * q2;
      out[l + 64] = d * scales[sub + 4] * q3;
      out[l + 96] = d * scales[sub + 6] * q4;
    }
    ql += 64;
    qh += 32;
    scales += 8;
    out += 128;
  }
}

void DequantizeF32(const uint8_t* block, float* out) { out[0] = FloatFromBits(LoadU32(block)); }
void DequantizeF16(const uint8_t* block, float* out) { out[0] = LoadHalf(block); }
void DequantizeBF16(const uint8_t* block, float* out) { out[0] = BFloat16ToFloat(LoadU16(block)); }

using BlockDequantizer = void (*)(const uint8_t* block, float* out);

BlockDequantizer DequantizerFor(StorageType type) {
  switch (type) {
    case StorageType::kF32: return DequantizeF32;
    case StorageType::kF16: return DequantizeF16;
    case StorageType::kBF16: return DequantizeBF16;
    case StorageType::kQ8_0: return DequantizeQ8_0;
    case StorageType::kQ4_0: return DequantizeQ4_0;
    case StorageType::kQ4_1: return DequantizeQ4_1;
    case StorageType::kQ5_0: return DequantizeQ5_0;
    case StorageType::kQ5_1: return DequantizeQ5_1;
    case StorageType::kQ4_K: return DequantizeQ4_K;
    case StorageType::kQ5_K: return DequantizeQ5_K;
    case StorageType::kQ6_K: return DequantizeQ6_K;
  }
  return DequantizeF32;  // Unreachable: the switch covers every enumerator.
}

absl::Status CheckSizes(StorageType type, size_t src_bytes, size_t dst_elements) {
  absl::StatusOr<uint64_t> expected = RowBytes(type, static_cast<int64_t>(dst_elements));
  if (!expected.ok()) return absl::InvalidArgumentError(absl::StrCat("dequantize: ", expected.status().message()));
  if (*expected != src_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("dequantize: ", dst_elements, " ", StorageTypeName(type),
                                                   " elements take ", *expected, " bytes, but the source has ",
                                                   src_bytes));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status DequantizeRow(StorageType type, absl::Span<const uint8_t> src, absl::Span<float> dst) {
  if (absl::Status sizes = CheckSizes(type, src.size(), dst.size()); !sizes.ok()) return sizes;
  const BlockDequantizer dequantize = DequantizerFor(type);
  const size_t block_elements = static_cast<size_t>(ElementsPerBlock(type));
  const size_t block_bytes = static_cast<size_t>(BytesPerBlock(type));
  for (size_t block = 0; block * block_elements < dst.size(); ++block) {
    dequantize(src.data() + block * block_bytes, dst.data() + block * block_elements);
  }
  return absl::OkStatus();
}

absl::Status DequantizeRowToF16(StorageType type, absl::Span<const uint8_t> src, absl::Span<uint16_t> dst) {
  if (absl::Status sizes = CheckSizes(type, src.size(), dst.size()); !sizes.ok()) return sizes;
  const BlockDequantizer dequantize = DequantizerFor(type);
  const size_t block_elements = static_cast<size_t>(ElementsPerBlock(type));
  const size_t block_bytes = static_cast<size_t>(BytesPerBlock(type));
  std::array<float, 256> staging;
  for (size_t block = 0; block * block_elements < dst.size(); ++block) {
    dequantize(src.data() + block * block_bytes, staging.data());
    for (size_t i = 0; i < block_elements; ++i) dst[block * block_elements + i] = FloatToHalf(staging[i]);
  }
  return absl::OkStatus();
}

}  // namespace kvjit::quant
