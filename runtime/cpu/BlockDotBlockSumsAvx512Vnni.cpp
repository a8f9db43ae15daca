// The 32-element block types' single rows of CpuNumerics::kFast (one and two
// tokens, the decode GEMV), in AVX-512 BW/VL/VNNI: the arithmetic of
// BlockGemmBlockSumsAvx512Vnni.cpp, so that a token's result does not depend
// on whether its step went through the GEMM.
//
// Per octet of eight blocks and row: each block's vpdpbusd lane sums (a
// block's 32 values + bias against the activations), added across their
// eight lanes by a transposing tree so that lane l holds block l's total, the
// unsigned encoding's correction (-bias times the block's sum of q, the
// same for every row), then acc_l = fma(d_w * d_x, float(total), acc_l), the
// offset formats' acc_l = fma(m, s, acc_l), and LaneSum(acc) at the end.
//
// Same linkage rule as DotKernels.h: only the entry points are external.

#if !defined(__AVX512VNNI__) || !defined(__AVX512VL__) || !defined(__AVX512BW__)
#error "BlockDotBlockSumsAvx512Vnni.cpp must be compiled with -mavx512f -mavx512bw -mavx512vl -mavx512vnni"
#endif

#include "runtime/cpu/Gcc12Avx512Warnings.h"

#include <immintrin.h>

#include <cstddef>
#include <cstring>

#include "runtime/cpu/BlockFormatsAvx512.h"
#include "runtime/cpu/DotKernels.h"
#include "runtime/cpu/Prefetch.h"

namespace kvjit::cpu::internal {
namespace {

constexpr int64_t kOctet = 8;

// Blocks 0..3 of p in lanes 0..3, each the sum of its low half's four lanes;
// the sums of their high halves in lanes 4..7.
__attribute__((always_inline)) inline __m256i QuadSums(const __m256i p[4]) {
  const __m256i pairs01 = _mm256_add_epi32(_mm256_unpacklo_epi32(p[0], p[1]), _mm256_unpackhi_epi32(p[0], p[1]));
  const __m256i pairs23 = _mm256_add_epi32(_mm256_unpacklo_epi32(p[2], p[3]), _mm256_unpackhi_epi32(p[2], p[3]));
  return _mm256_add_epi32(_mm256_unpacklo_epi64(pairs01, pairs23), _mm256_unpackhi_epi64(pairs01, pairs23));
}

// Lane l: the sum of partial[l]'s eight lanes, for the `valid` first blocks
// (the rest are zeros). Integer adds, exact. A row's short last octet of up
// to four blocks takes half the tree: narrow rows (SmolLM2's 576 columns,
// two octets and two blocks) spend a good part of their time in it.
__attribute__((always_inline)) inline __m256i BlockTotals(const __m256i partial[kOctet], int64_t valid) {
  const __m256i low = QuadSums(partial);
  if (valid <= 4) {
    return _mm256_zextsi128_si256(_mm_add_epi32(_mm256_castsi256_si128(low), _mm256_extracti128_si256(low, 1)));
  }
  const __m256i high = QuadSums(partial + 4);
  return _mm256_add_epi32(_mm256_permute2x128_si256(low, high, 0x20), _mm256_permute2x128_si256(low, high, 0x31));
}

// What every row of an octet shares: the activations' q, their scales (and
// scaled sums) and the integer corrections of the unsigned encoding.
struct OctetActivations {
  __m256i q[kOctet];
  __m256 scales;
  __m256 scaled_sums;
  __m256i corrections;
};

// Lane l: the four bytes at first + l * kStride, for l < valid; zeros past
// them. Loaded one by one and interleaved: a vpgatherdd of them measured
// slower on Zen 4.
template <int64_t kStride>
__attribute__((always_inline)) inline __m256i FirstDwords(const void* first, int64_t valid) {
  const auto* row = static_cast<const uint8_t*>(first);
  __m128i words[kOctet];
  for (int64_t l = 0; l < kOctet; ++l) {
    int32_t word = 0;
    if (l < valid) std::memcpy(&word, row + l * kStride, sizeof word);
    words[l] = _mm_cvtsi32_si128(word);
  }
  const __m128i low = _mm_unpacklo_epi64(_mm_unpacklo_epi32(words[0], words[1]), _mm_unpacklo_epi32(words[2], words[3]));
  const __m128i high = _mm_unpacklo_epi64(_mm_unpacklo_epi32(words[4], words[5]), _mm_unpacklo_epi32(words[6], words[7]));
  return _mm256_inserti128_si256(_mm256_castsi128_si256(low), high, 1);
}

template <class Format>
__attribute__((always_inline)) inline OctetActivations LoadOctet(const Q8Block32* a, int64_t valid) {
  OctetActivations octet;
  __m256i ones_sums[kOctet];
  for (int64_t l = 0; l < kOctet; ++l) {
    octet.q[l] = l < valid ? Load256(a[l].q) : _mm256_setzero_si256();
    if (Format::kBias != 0) ones_sums[l] = _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_set1_epi8(1), octet.q[l]);
  }
  constexpr int64_t kStride = sizeof(Q8Block32);
  octet.scales = _mm256_castsi256_ps(FirstDwords<kStride>(&a->scale, valid));
  octet.scaled_sums =
      Format::kHasOffset ? _mm256_castsi256_ps(FirstDwords<kStride>(&a->scaled_sum, valid)) : _mm256_setzero_ps();
  octet.corrections = Format::kBias != 0
                          ? _mm256_mullo_epi32(BlockTotals(ones_sums, valid), _mm256_set1_epi32(-Format::kBias))
                          : _mm256_setzero_si256();
  return octet;
}

// The f16 halves of each dword's low (and high) 16 bits as floats.
__m256 LowHalves(__m256i dwords) { return _mm256_cvtph_ps(_mm256_cvtepi32_epi16(dwords)); }
__m256 HighHalves(__m256i dwords) { return LowHalves(_mm256_srli_epi32(dwords, 16)); }

// Row `row`'s octet (its first block at `row`, the next ones kBlockStride
// further on, `valid` of them) into its lanes.
template <class Format, int64_t kBlockStride>
__attribute__((always_inline)) inline void AddOctet(const uint8_t* row, const OctetActivations& x, int64_t valid,
                                                    __m256& acc) {
  __m256i partial[kOctet];
  for (int64_t l = 0; l < kOctet; ++l) {
    partial[l] = l < valid ? _mm256_dpbusd_epi32(_mm256_setzero_si256(), Format::Unsigned(row + l * kBlockStride), x.q[l])
                           : _mm256_setzero_si256();
  }
  const __m256i totals = _mm256_add_epi32(BlockTotals(partial, valid), x.corrections);
  // d (and m) of the blocks.
  const __m256i factors = FirstDwords<kBlockStride>(row, valid);
  acc = _mm256_fmadd_ps(_mm256_mul_ps(LowHalves(factors), x.scales), _mm256_cvtepi32_ps(totals), acc);
  if (Format::kHasOffset) acc = _mm256_fmadd_ps(HighHalves(factors), x.scaled_sums, acc);
}

float Result(__m256 acc) {
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, acc);
  return LaneSum(lanes);
}

// Row-major blocks (kRowsInterleaved 1) or the interleaved layout's (8): the
// next block of a row lies kRowsInterleaved blocks further on.
template <class Format, int64_t kRowsInterleaved>
float DotBlockSums(const uint8_t* weight_row, const void* activation_row, int64_t cols) {
  constexpr int64_t kBlockStride = kRowsInterleaved * Format::kBytes;
  const auto* activations = static_cast<const Q8Block32*>(activation_row);
  const int64_t blocks = cols / 32;
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < blocks; b += kOctet) {
    const int64_t valid = blocks - b < kOctet ? blocks - b : kOctet;
    const OctetActivations x = LoadOctet<Format>(activations + b, valid);
    AddOctet<Format, kBlockStride>(weight_row + b * kBlockStride, x, valid, acc);
  }
  return Result(acc);
}

// A decode GEMV asks for the weights that come next while these are
// computed (DotKernelsAvx2.cpp's DotBlocks32Rows says why). In GGUF's rows,
// each block asks for the same block of the next rows, into L2 from
// kL2PrefetchDistance ahead on (Prefetch.h says why). Interleaved, the
// group's eight rows go side by side, so that the weights are read as one
// stream, and each octet asks for the stream kStreamPrefetchBytes ahead, into
// L1: a fixed distance in the stream, across the groups the caller hands over
// one by one. (Four rows at a time, asking a group ahead, read a 285 MB Q8_0
// matrix at 19 GB/s against the batch-invariant kernel's 28.)
constexpr int64_t kL2PrefetchDistance = 2048;
constexpr int64_t kStreamPrefetchBytes = 2048;

// DotBlockSums for consecutive weight rows (row r at weights + r *
// row_bytes; interleaved, a group with the block's bytes as row_bytes)
// against one activation row, four rows at once (interleaved, eight): they
// share the octet's activations and corrections, and each takes
// DotBlockSums' operations.
template <class Format, int64_t kRowsInterleaved>
void DotBlockSumsRows(const uint8_t* weights, int64_t row_bytes, int64_t rows, const void* activation_row,
                      int64_t cols, float* out) {
  constexpr int kSideBySide = kRowsInterleaved == 1 ? 4 : kRowsInterleaved;
  constexpr int64_t kBlockStride = kRowsInterleaved * Format::kBytes;
  const auto* activations = static_cast<const Q8Block32*>(activation_row);
  const int64_t blocks = cols / 32;
  const int64_t ahead = kSideBySide * row_bytes;  // GGUF's rows
  int64_t r = 0;
  for (; r + kSideBySide <= rows; r += kSideBySide) {
    __m256 acc[kSideBySide];
    for (int k = 0; k < kSideBySide; ++k) acc[k] = _mm256_setzero_ps();
    for (int64_t b = 0; b < blocks; b += kOctet) {
      const int64_t valid = blocks - b < kOctet ? blocks - b : kOctet;
      if (kRowsInterleaved != 1) {
        PrefetchLines(weights + b * kBlockStride + kStreamPrefetchBytes, valid * kBlockStride);
      }
      const OctetActivations x = LoadOctet<Format>(activations + b, valid);
#pragma GCC unroll 8
      for (int k = 0; k < kSideBySide; ++k) {
        const uint8_t* row = weights + (r + k) * row_bytes + b * kBlockStride;
        for (int64_t l = 0; kRowsInterleaved == 1 && l < valid; ++l) {
          const char* next = reinterpret_cast<const char*>(row + l * kBlockStride) + ahead;
          if (ahead >= kL2PrefetchDistance) {
            _mm_prefetch(next, _MM_HINT_T1);
          } else {
            _mm_prefetch(next, _MM_HINT_T0);
          }
        }
        AddOctet<Format, kBlockStride>(row, x, valid, acc[k]);
      }
    }
    for (int k = 0; k < kSideBySide; ++k) out[r + k] = Result(acc[k]);
  }
  for (; r < rows; ++r) out[r] = DotBlockSums<Format, kRowsInterleaved>(weights + r * row_bytes, activation_row, cols);
}

template <int64_t kRowsInterleaved>
constexpr BlockDotKernels DotKernelsFor() {
  return {DotBlockSums<Q8_0Format, kRowsInterleaved>, DotBlockSums<Q4_0Format, kRowsInterleaved>,
          DotBlockSums<Q4_1Format, kRowsInterleaved>, DotBlockSums<Q5_0Format, kRowsInterleaved>,
          DotBlockSums<Q5_1Format, kRowsInterleaved>};
}

template <int64_t kRowsInterleaved>
constexpr RowsDotKernels RowsDotKernelsFor() {
  return {DotBlockSumsRows<Q8_0Format, kRowsInterleaved>, DotBlockSumsRows<Q4_0Format, kRowsInterleaved>,
          DotBlockSumsRows<Q4_1Format, kRowsInterleaved>, DotBlockSumsRows<Q5_0Format, kRowsInterleaved>,
          DotBlockSumsRows<Q5_1Format, kRowsInterleaved>};
}

}  // namespace

const BlockDotKernels& Avx512VnniBlockSumDotKernels() {
  static constexpr BlockDotKernels kKernels = DotKernelsFor<1>();
  return kKernels;
}

const BlockDotKernels& Avx512VnniInterleaved8BlockSumDotKernels() {
  static constexpr BlockDotKernels kKernels = DotKernelsFor<8>();
  return kKernels;
}

const RowsDotKernels& Avx512VnniBlockSumRowsDotKernels() {
  static constexpr RowsDotKernels kKernels = RowsDotKernelsFor<1>();
  return kKernels;
}

const RowsDotKernels& Avx512VnniInterleaved8BlockSumRowsDotKernels() {
  static constexpr RowsDotKernels kKernels = RowsDotKernelsFor<8>();
  return kKernels;
}

}  // namespace kvjit::cpu::internal
