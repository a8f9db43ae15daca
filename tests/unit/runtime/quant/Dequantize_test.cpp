#include "runtime/quant/Dequantize.h"

#include <array>
#include <cstdint>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/quant/Half.h"

namespace kvjit::quant {
namespace {

using ::testing::HasSubstr;

// Binary16 patterns of exact powers of two (and -3), so that every expected
// value below is exact in float and can be compared with ==.
constexpr uint16_t kHalfOne = 0x3c00;
constexpr uint16_t kHalfHalf = 0x3800;
constexpr uint16_t kHalfQuarter = 0x3400;
constexpr uint16_t kHalfEighth = 0x3000;
constexpr uint16_t kHalfMinusThree = 0xc200;

// The tests choose the quantized values first and pack them into blocks by
// hand, following each layout's description; dequantizing must give back the
// layout's formula applied to the chosen values.
class BlockBytes {
 public:
  void U8(uint8_t v) { bytes_.push_back(v); }
  void U16(uint16_t v) {
    U8(static_cast<uint8_t>(v));
    U8(static_cast<uint8_t>(v >> 8));
  }
  void U32(uint32_t v) {
    U16(static_cast<uint16_t>(v));
    U16(static_cast<uint16_t>(v >> 16));
  }
  const std::vector<uint8_t>& bytes() const { return bytes_; }

 private:
  std::vector<uint8_t> bytes_;
};

std::vector<float> Dequantize(StorageType type, const std::vector<uint8_t>& block, size_t elements) {
  std::vector<float> out(elements, -12345.0f);
  absl::Status status = DequantizeRow(type, block, absl::MakeSpan(out));
  EXPECT_TRUE(status.ok()) << status;
  return out;
}

// Values in [0, modulus) that visit every residue in a scrambled order.
std::vector<int> Pattern(size_t count, int multiplier, int offset, int modulus) {
  std::vector<int> values(count);
  for (size_t i = 0; i < count; ++i) values[i] = static_cast<int>((i * multiplier + offset) % modulus);
  return values;
}

// Nibble pairs of 32-element blocks: byte j holds element j (low) and j + 16 (high).
void PackNibbles(const std::vector<int>& values, BlockBytes& block) {
  for (int j = 0; j < 16; ++j) block.U8(static_cast<uint8_t>((values[j] & 15) | ((values[j + 16] & 15) << 4)));
}

uint32_t PackFifthBits(const std::vector<int>& values) {
  uint32_t qh = 0;
  for (int i = 0; i < 32; ++i) qh |= static_cast<uint32_t>(values[i] >> 4) << i;
  return qh;
}

TEST(DequantizeTest, Q8_0) {
  BlockBytes block;
  block.U16(kHalfHalf);
  std::vector<int> q(32);
  for (int i = 0; i < 32; ++i) q[i] = -128 + 8 * i + (i % 3);
  for (int v : q) block.U8(static_cast<uint8_t>(static_cast<int8_t>(v)));
  std::vector<float> y = Dequantize(StorageType::kQ8_0, block.bytes(), 32);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(y[i], q[i] * 0.5f) << i;
}

TEST(DequantizeTest, Q4_0LiteralBlock) {
  // d = 1; byte 0 = 0x1f: element 0 is 15 - 8, element 16 is 1 - 8.
  std::vector<uint8_t> block = {0x00, 0x3c, 0x1f, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x08};
  std::vector<float> y = Dequantize(StorageType::kQ4_0, block, 32);
  EXPECT_EQ(y[0], 7.0f);
  EXPECT_EQ(y[16], -7.0f);
  EXPECT_EQ(y[1], -8.0f);
  EXPECT_EQ(y[17], 0.0f);
  EXPECT_EQ(y[15], 0.0f);
  EXPECT_EQ(y[31], -8.0f);
}

TEST(DequantizeTest, Q4_0) {
  const std::vector<int> q = Pattern(32, 5, 3, 16);
  BlockBytes block;
  block.U16(kHalfQuarter);
  PackNibbles(q, block);
  std::vector<float> y = Dequantize(StorageType::kQ4_0, block.bytes(), 32);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(y[i], (q[i] - 8) * 0.25f) << i;
}

TEST(DequantizeTest, Q4_1) {
  const std::vector<int> q = Pattern(32, 7, 1, 16);
  BlockBytes block;
  block.U16(kHalfHalf);
  block.U16(kHalfMinusThree);
  PackNibbles(q, block);
  std::vector<float> y = Dequantize(StorageType::kQ4_1, block.bytes(), 32);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(y[i], q[i] * 0.5f - 3.0f) << i;
}

TEST(DequantizeTest, Q5_0) {
  const std::vector<int> q = Pattern(32, 11, 7, 32);
  BlockBytes block;
  block.U16(kHalfQuarter);
  block.U32(PackFifthBits(q));
  PackNibbles(q, block);
  std::vector<float> y = Dequantize(StorageType::kQ5_0, block.bytes(), 32);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(y[i], (q[i] - 16) * 0.25f) << i;
}

TEST(DequantizeTest, Q5_0FifthBitIsLittleEndian) {
  // qh = 0x00010001 (bytes 01 00 01 00): elements 0 and 16 get bit 4.
  std::vector<uint8_t> block(22, 0);
  block[1] = 0x3c;
  block[2] = 0x01;
  block[4] = 0x01;
  std::vector<float> y = Dequantize(StorageType::kQ5_0, block, 32);
  EXPECT_EQ(y[0], 0.0f);
  EXPECT_EQ(y[16], 0.0f);
  EXPECT_EQ(y[1], -16.0f);
  EXPECT_EQ(y[8], -16.0f);
}

TEST(DequantizeTest, Q5_1) {
  const std::vector<int> q = Pattern(32, 13, 5, 32);
  BlockBytes block;
  block.U16(kHalfEighth);
  block.U16(kHalfMinusThree);
  block.U32(PackFifthBits(q));
  PackNibbles(q, block);
  std::vector<float> y = Dequantize(StorageType::kQ5_1, block.bytes(), 32);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(y[i], q[i] * 0.125f - 3.0f) << i;
}

// Q4_K / Q5_K scales: 8 sub-blocks of 32 with 6-bit scales and mins in 12
// bytes. Sub-blocks 0..3 use the low 6 bits of bytes j (scale) and j + 4
// (min); 4..7 use byte j + 4 (scale low nibble, min high nibble) and keep
// their top two bits in the top of bytes j - 4 (scale) and j (min).
std::array<uint8_t, 12> PackScalesAndMins(const std::array<int, 8>& scales, const std::array<int, 8>& mins) {
  std::array<uint8_t, 12> packed{};
  for (int j = 0; j < 4; ++j) {
    packed[j] = static_cast<uint8_t>(scales[j] | ((scales[j + 4] >> 4) << 6));
    packed[j + 4] = static_cast<uint8_t>(mins[j] | ((mins[j + 4] >> 4) << 6));
    packed[j + 8] = static_cast<uint8_t>((scales[j + 4] & 15) | ((mins[j + 4] & 15) << 4));
  }
  return packed;
}

TEST(DequantizeTest, Q4_KLiteralScales) {
  BlockBytes block;
  block.U16(kHalfOne);
  block.U16(kHalfHalf);
  // Sub-block scale/min: 0: 1/5, 1: 2/6, 2: 3/7, 3: 4/8, 4: 1+16/2+32 (top
  // bits from 0x41 and 0x85), 5: 3/4, 6: 5/6, 7: 7/8.
  for (uint8_t b : {0x41, 0x02, 0x03, 0x04, 0x85, 0x06, 0x07, 0x08, 0x21, 0x43, 0x65, 0x87}) block.U8(b);
  for (int i = 0; i < 128; ++i) block.U8(0x11);  // every q is 1: y = scale - min / 2
  std::vector<float> y = Dequantize(StorageType::kQ4_K, block.bytes(), 256);
  const float expected[8] = {-1.5f, -1.0f, -0.5f, 0.0f, 0.0f, 1.0f, 2.0f, 3.0f};
  for (int i = 0; i < 256; ++i) EXPECT_EQ(y[i], expected[i / 32]) << i;
}

TEST(DequantizeTest, Q4_K) {
  const std::array<int, 8> scales = {0, 63, 17, 48, 5, 33, 62, 16};
  const std::array<int, 8> mins = {63, 0, 31, 32, 47, 1, 16, 50};
  const std::vector<int> q = Pattern(256, 7, 3, 16);
  BlockBytes block;
  block.U16(kHalfHalf);     // d
  block.U16(kHalfQuarter);  // dmin
  for (uint8_t b : PackScalesAndMins(scales, mins)) block.U8(b);
  // Each 64 elements take 32 bytes: low nibbles then high nibbles.
  for (int group = 0; group < 4; ++group) {
    for (int l = 0; l < 32; ++l) block.U8(static_cast<uint8_t>(q[64 * group + l] | (q[64 * group + 32 + l] << 4)));
  }
  ASSERT_EQ(block.bytes().size(), 144u);
  std::vector<float> y = Dequantize(StorageType::kQ4_K, block.bytes(), 256);
  for (int i = 0; i < 256; ++i) EXPECT_EQ(y[i], 0.5f * scales[i / 32] * q[i] - 0.25f * mins[i / 32]) << i;
}

TEST(DequantizeTest, Q5_K) {
  const std::array<int, 8> scales = {63, 1, 48, 17, 33, 2, 16, 62};
  const std::array<int, 8> mins = {0, 63, 32, 31, 1, 47, 50, 16};
  const std::vector<int> q = Pattern(256, 11, 5, 32);
  BlockBytes block;
  block.U16(kHalfQuarter);  // d
  block.U16(kHalfEighth);   // dmin
  for (uint8_t b : PackScalesAndMins(scales, mins)) block.U8(b);
  // qh[l]: bit 2g tops element 64g + l, bit 2g + 1 element 64g + 32 + l.
  for (int l = 0; l < 32; ++l) {
    int qh = 0;
    for (int group = 0; group < 4; ++group) {
      qh |= (q[64 * group + l] >> 4) << (2 * group);
      qh |= (q[64 * group + 32 + l] >> 4) << (2 * group + 1);
    }
    block.U8(static_cast<uint8_t>(qh));
  }
  for (int group = 0; group < 4; ++group) {
    for (int l = 0; l < 32; ++l) {
      block.U8(static_cast<uint8_t>((q[64 * group + l] & 15) | ((q[64 * group + 32 + l] & 15) << 4)));
    }
  }
  ASSERT_EQ(block.bytes().size(), 176u);
  std::vector<float> y = Dequantize(StorageType::kQ5_K, block.bytes(), 256);
  for (int i = 0; i < 256; ++i) EXPECT_EQ(y[i], 0.25f * scales[i / 32] * q[i] - 0.125f * mins[i / 32]) << i;
}

TEST(DequantizeTest, Q6_K) {
  const std::vector<int> q = Pattern(256, 37, 11, 64);
  const std::array<int8_t, 16> scales = {-128, 127, -1, 1, 0, 64, -64, 33, -33, 100, -100, 7, -7, 2, -2, 50};
  // Each half of 128 elements: element 128h + 32k + l (quarter k, l < 32)
  // has its low 4 bits in ql[64h + l + 32 * (k & 1)] (low nibble when k < 2,
  // high otherwise) and its top 2 bits at bits 2k of qh[32h + l].
  std::array<uint8_t, 128> ql{};
  std::array<uint8_t, 64> qh{};
  for (int h = 0; h < 2; ++h) {
    for (int k = 0; k < 4; ++k) {
      for (int l = 0; l < 32; ++l) {
        const int value = q[128 * h + 32 * k + l];
        ql[64 * h + l + 32 * (k & 1)] |= static_cast<uint8_t>((value & 15) << (k < 2 ? 0 : 4));
        qh[32 * h + l] |= static_cast<uint8_t>((value >> 4) << (2 * k));
      }
    }
  }
  BlockBytes block;
  for (uint8_t b : ql) block.U8(b);
  for (uint8_t b : qh) block.U8(b);
  for (int8_t s : scales) block.U8(static_cast<uint8_t>(s));
  block.U16(kHalfEighth);
  ASSERT_EQ(block.bytes().size(), 210u);
  std::vector<float> y = Dequantize(StorageType::kQ6_K, block.bytes(), 256);
  for (int i = 0; i < 256; ++i) EXPECT_EQ(y[i], 0.125f * scales[i / 16] * (q[i] - 32)) << i;
}

TEST(DequantizeTest, MultipleBlocksInARow) {
  BlockBytes row;
  for (uint16_t d : {kHalfOne, kHalfHalf, kHalfMinusThree}) {
    row.U16(d);
    for (int i = 0; i < 32; ++i) row.U8(static_cast<uint8_t>(i));
  }
  std::vector<float> y = Dequantize(StorageType::kQ8_0, row.bytes(), 96);
  EXPECT_EQ(y[5], 5.0f);
  EXPECT_EQ(y[32 + 5], 2.5f);
  EXPECT_EQ(y[64 + 5], -15.0f);
}

TEST(DequantizeTest, PlainFloatRows) {
  BlockBytes f32;
  f32.U32(FloatBits(1.5f));
  f32.U32(FloatBits(-0.0f));
  EXPECT_THAT(Dequantize(StorageType::kF32, f32.bytes(), 2), ::testing::ElementsAre(1.5f, -0.0f));
  BlockBytes f16;
  f16.U16(kHalfMinusThree);
  f16.U16(0x0001);
  EXPECT_THAT(Dequantize(StorageType::kF16, f16.bytes(), 2), ::testing::ElementsAre(-3.0f, HalfToFloat(0x0001)));
  BlockBytes bf16;
  bf16.U16(0x3fc0);
  bf16.U16(0xc2f7);
  EXPECT_THAT(Dequantize(StorageType::kBF16, bf16.bytes(), 2), ::testing::ElementsAre(1.5f, -123.5f));
}

TEST(DequantizeTest, ToF16RoundsEachElement) {
  BlockBytes f32;
  f32.U32(FloatBits(1.0f + 1.0f / 2048));  // tie between 1 and 1 + 2^-10: even is 1
  f32.U32(FloatBits(70000.0f));
  std::vector<uint16_t> out(2);
  ASSERT_TRUE(DequantizeRowToF16(StorageType::kF32, f32.bytes(), absl::MakeSpan(out)).ok());
  EXPECT_THAT(out, ::testing::ElementsAre(0x3c00, 0x7c00));

  const std::vector<int> q = Pattern(32, 5, 3, 16);
  BlockBytes block;
  block.U16(kHalfQuarter);
  PackNibbles(q, block);
  std::vector<uint16_t> halves(32);
  ASSERT_TRUE(DequantizeRowToF16(StorageType::kQ4_0, block.bytes(), absl::MakeSpan(halves)).ok());
  for (int i = 0; i < 32; ++i) EXPECT_EQ(halves[i], FloatToHalf((q[i] - 8) * 0.25f)) << i;
}

TEST(DequantizeTest, RejectsPartialBlocks) {
  std::vector<uint8_t> src(18 * 2);
  std::vector<float> dst(33);
  absl::Status status = DequantizeRow(StorageType::kQ4_0, src, absl::MakeSpan(dst));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("33 q4_0 elements are not a multiple of the block size 32"));
}

TEST(DequantizeTest, RejectsSourceOfWrongSize) {
  std::vector<uint8_t> src(17);
  std::vector<float> dst(32, 7.0f);
  absl::Status status = DequantizeRow(StorageType::kQ4_0, src, absl::MakeSpan(dst));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("32 q4_0 elements take 18 bytes, but the source has 17"));
  EXPECT_EQ(dst[0], 7.0f);
  std::vector<uint16_t> halves(256);
  std::vector<uint8_t> q6k(211);
  EXPECT_THAT(DequantizeRowToF16(StorageType::kQ6_K, q6k, absl::MakeSpan(halves)).message(),
              HasSubstr("take 210 bytes, but the source has 211"));
}

}  // namespace
}  // namespace kvjit::quant
