#ifndef KVJIT_RUNTIME_CPU_HALFDOT_H_
#define KVJIT_RUNTIME_CPU_HALFDOT_H_

// The f16 x f16 dot products of ggml's (non-flash) attention, for the f16
// KV cache path of PagedAttention (see PagedAttention.h for why it follows
// ggml). Operands are f16 values; products are exact in f32, so the result
// depends only on how ggml's AVX2 code groups the sums, which is spelled out
// here. The scalar, AVX2 and AVX-512 forms return the same bits.

#include <cstdint>

namespace kvjit::cpu {

enum class HalfDotOrder {
  // ggml_vec_dot_f16, which llama.cpp runs for a one-token batch: element i
  // goes by FMA to lane i % 32 of four 8-lane accumulators a0..a3, folded as
  // (a0 + a2) + (a1 + a3) lane by lane, then t_i = v_i + v_{i+4} and
  // (t0 + t1) + (t2 + t3). The n % 32 elements after the last full step are
  // added after that, in double, one f32 product at a time.
  kVecDot,
  // llamafile's tinyBLAS, which llama.cpp runs for batches of several tokens:
  // element i goes by FMA to lane i % 8 of one accumulator, folded by
  // SumEightLanes. It takes only n a multiple of 8; otherwise ggml, and so
  // HalfDotRows, falls back to kVecDot.
  kTinyBlas,
};

// How many f32 lane accumulators `order` keeps (32 or 8).
int HalfDotLanes(HalfDotOrder order);

// t_i = v_i + v_{i+4}, then (t0 + t2) + (t1 + t3): how ggml's softmax and
// tinyBLAS reduce an 8-lane register. Reads v[0], v[stride], ... v[7 * stride].
float SumEightLanes(const float* v, int64_t stride);

// Folds `order`'s HalfDotLanes(order) lane accumulators, read at lanes[0],
// lanes[stride], ..., into the dot product (without kVecDot's tail).
float FoldHalfDotLanes(HalfDotOrder order, const float* lanes, int64_t stride);

// FoldHalfDotLanes for n dot products at once: lanes is
// [HalfDotLanes(order)][n], out[i] the fold of column i.
void FoldHalfDotLaneRows(HalfDotOrder order, const float* lanes, int64_t n, float* out);

// out[r] = dot(row r of x, y) over n elements in `order`, for r < rows; row
// r of x is n f16 values (2 bytes each, as the KV cache stores them) at
// x + r * row_bytes, y holds f32 values that are already f16 values (ggml
// rounds that operand to f16 first).
void HalfDotRows(HalfDotOrder order, const uint8_t* x, int64_t row_bytes, int64_t rows, const float* y, int64_t n,
                 float* out);

// HalfDotRows for `queries` query rows at once (y + q * n for q < queries):
// out[q * out_stride + r] = dot(row r of x, query q), each the bits
// HalfDotRows gives that query alone. A key row is loaded and converted once
// for every query: the query heads of one kv head's group share their keys.
void HalfDotRowsQueries(HalfDotOrder order, const uint8_t* x, int64_t row_bytes, int64_t rows, const float* y,
                        int64_t queries, int64_t n, float* out, int64_t out_stride);

// One step of n dot products at once, one per column of the rows of x
// (as in HalfDotRows) against a: for r < rows, row r of x is element
// e = first_element + r of each product and goes to lane accumulator
// e % lane_count, i.e. lane[i] = fma(x[r][i], a[r], lane[i]) for
// lane = lanes + (e % lane_count) * n. The attention's weighted sum of value
// rows is computed this way, reading the cached rows contiguously; the lanes
// are then folded by FoldHalfDotLaneRows.
void HalfAxpyRows(const uint8_t* x, int64_t row_bytes, int64_t rows, const float* a, int64_t n, float* lanes,
                  int lane_count, int64_t first_element);

// HalfAxpyRows for `queries` sets of weights (a + q * a_stride) into their
// own lanes (lanes + q * lanes_stride), each set's lanes the bits
// HalfAxpyRows gives it alone; a value row is loaded and converted once for
// every set.
void HalfAxpyRowsQueries(const uint8_t* x, int64_t row_bytes, int64_t rows, const float* a, int64_t a_stride,
                         int64_t queries, int64_t n, float* lanes, int64_t lanes_stride, int lane_count,
                         int64_t first_element);

// HalfAxpyRowsQueries over rows wherever they lie, row r at rows[r] (the
// value rows of consecutive positions across a paged cache's blocks), so that
// the lanes can stay in registers from one block to the next. The same bits.
void HalfAxpyRowPointersQueries(const uint8_t* const* rows, int64_t count, const float* a, int64_t a_stride,
                                int64_t queries, int64_t n, float* lanes, int64_t lanes_stride, int lane_count,
                                int64_t first_element);

// out[i] = x[i] rounded to the nearest f16 (ties to even), as a float: how
// ggml converts an f32 operand of an f16 product. `out` may alias `x`.
void RoundToHalfRow(const float* x, float* out, int64_t n);

// out[2i], out[2i + 1] = the f16 nearest x[i] (ties to even; quant's
// FloatToHalf), little-endian: how the KV cache stores a row. A NaN stays a
// NaN (its payload is not kept).
void StoreHalfRow(const float* x, uint8_t* out, int64_t n);

namespace internal {
// The implementations behind HalfDotRows, HalfAxpyRows, their Queries forms,
// FoldHalfDotLaneRows, RoundToHalfRow and StoreHalfRow, for tests.
struct HalfDotKernels {
  void (*dot_rows)(HalfDotOrder order, const uint8_t* x, int64_t row_bytes, int64_t rows, const float* y, int64_t n,
                   float* out);
  void (*axpy_rows)(const uint8_t* x, int64_t row_bytes, int64_t rows, const float* a, int64_t n, float* lanes,
                    int lane_count, int64_t first_element);
  void (*dot_rows_queries)(HalfDotOrder order, const uint8_t* x, int64_t row_bytes, int64_t rows, const float* y,
                           int64_t queries, int64_t n, float* out, int64_t out_stride);
  void (*axpy_rows_queries)(const uint8_t* x, int64_t row_bytes, int64_t rows, const float* a, int64_t a_stride,
                            int64_t queries, int64_t n, float* lanes, int64_t lanes_stride, int lane_count,
                            int64_t first_element);
  void (*fold_lane_rows)(HalfDotOrder order, const float* lanes, int64_t n, float* out);
  void (*round_to_half)(const float* x, float* out, int64_t n);
  void (*store_half)(const float* x, uint8_t* out, int64_t n);
};
const HalfDotKernels& PortableHalfDotKernels();
// Null where this build or CPU has no AVX2 + FMA + F16C.
const HalfDotKernels* Avx2HalfDotKernels();
// 16-lane registers where they keep the lanes' operations (kVecDot's dot
// products, the axpy); null unless the ISA chosen (BestCpuIsa) is AVX-512 VNNI.
const HalfDotKernels* Avx512HalfDotKernels();
}  // namespace internal

}  // namespace kvjit::cpu

#endif  // KVJIT_RUNTIME_CPU_HALFDOT_H_
