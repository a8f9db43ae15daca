#include "runtime/cpu/RowKernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "runtime/core/StatusMacros.h"
#include "runtime/cpu/FastExp.h"
#include "runtime/quant/Dequantize.h"

namespace kvjit::cpu {
namespace {

// Element-wise work is memory-bound: split only what amortizes a hand-off.
constexpr int64_t kMinElementsPerChunk = 1 << 14;

int64_t MinRowsPerChunk(int64_t width) { return std::max<int64_t>(1, kMinElementsPerChunk / std::max<int64_t>(width, 1)); }

absl::Status CheckShape(absl::string_view kernel, int64_t rows, int64_t width) {
  if (rows < 0 || width < 0) {
    return absl::InvalidArgumentError(absl::StrCat(kernel, ": negative shape [", rows, " x ", width, "]"));
  }
  if (rows > 0 && width > std::numeric_limits<int64_t>::max() / rows) {
    return absl::InvalidArgumentError(absl::StrCat(kernel, ": shape [", rows, " x ", width, "] overflows"));
  }
  return absl::OkStatus();
}

// Every pointer must be set unless there is nothing to read or write.
absl::Status CheckPointers(absl::string_view kernel, int64_t elements, std::initializer_list<const void*> pointers) {
  if (elements == 0) return absl::OkStatus();
  for (const void* pointer : pointers) {
    if (pointer == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(kernel, ": null pointer for ", elements, " elements"));
    }
  }
  return absl::OkStatus();
}

// Rows per group whose sums of squares advance side by side: each row's sum
// is a chain of dependent double adds in element order (ggml's), as slow as
// the add's latency, so independent rows fill the time between them.
constexpr int64_t kNormRowGroup = 4;

// RMS norm of rows x[r * width ...] into out[r * width ...] for r < kRows;
// each row's sum of squares in double, element by element.
template <int64_t kRows>
void RmsNormRowGroup(const float* x, const float* weight, float eps, int64_t width, float* out) {
  double sums[kRows] = {};
  for (int64_t i = 0; i < width; ++i) {
    for (int64_t r = 0; r < kRows; ++r) {
      const float value = x[r * width + i];
      sums[r] += static_cast<double>(value * value);
    }
  }
  for (int64_t r = 0; r < kRows; ++r) {
    const float mean = static_cast<float>(sums[r] / static_cast<double>(width));
    const float scale = 1.0f / std::sqrt(mean + eps);
    const float* row = x + r * width;
    float* normed = out + r * width;
    for (int64_t i = 0; i < width; ++i) normed[i] = (row[i] * scale) * weight[i];
  }
}

// Rows [begin, end) of x, kNormRowGroup at a time.
void RmsNormRows(const float* x, const float* weight, float eps, int64_t width, int64_t begin, int64_t end,
                 float* out) {
  int64_t r = begin;
  for (; r + kNormRowGroup <= end; r += kNormRowGroup) {
    RmsNormRowGroup<kNormRowGroup>(x + r * width, weight, eps, width, out + r * width);
  }
  for (; r < end; ++r) RmsNormRowGroup<1>(x + r * width, weight, eps, width, out + r * width);
}

// A norm's rows are latency-bound, not memory-bound (RmsNormRowGroup): a
// chunk of two groups already pays for a hand-off.
constexpr int64_t kMinNormRowsPerChunk = 2 * kNormRowGroup;

// SiLU a chunk at a time, so that FastExpRow can take eight exps at once.
constexpr int64_t kSiluChunk = 256;

template <class Store>
void SiluChunks(const float* x, int64_t begin, int64_t end, const Store& store) {
  float exps[kSiluChunk];
  for (int64_t first = begin; first < end; first += kSiluChunk) {
    const int64_t count = std::min(kSiluChunk, end - first);
    for (int64_t i = 0; i < count; ++i) exps[i] = -x[first + i];
    FastExpRow(exps, exps, count);
    for (int64_t i = 0; i < count; ++i) store(first + i, x[first + i] / (1.0f + exps[i]));
  }
}

// Checks an element-wise kernel's arguments, then runs range(begin, end)
// over a split of 0..n.
template <class Range>
absl::Status ElementRanges(absl::string_view kernel, int64_t n, std::initializer_list<const void*> pointers,
                           ThreadPool& pool, const Range& range) {
  if (n < 0) return absl::InvalidArgumentError(absl::StrCat(kernel, ": negative element count ", n));
  KVJIT_RETURN_IF_ERROR(CheckPointers(kernel, n, pointers));
  pool.ParallelFor(n, kMinElementsPerChunk, range);
  return absl::OkStatus();
}

template <class Function>
absl::Status ElementWise(absl::string_view kernel, int64_t n, std::initializer_list<const void*> pointers,
                         ThreadPool& pool, const Function& function) {
  return ElementRanges(kernel, n, pointers, pool, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) function(i);
  });
}

}  // namespace

absl::Status RmsNorm(const float* x, const float* weight, float eps, int64_t rows, int64_t width, float* out,
                     ThreadPool& pool) {
  KVJIT_RETURN_IF_ERROR(CheckShape("RmsNorm", rows, width));
  KVJIT_RETURN_IF_ERROR(CheckPointers("RmsNorm", rows * width, {x, weight, out}));
  pool.ParallelFor(rows, kMinNormRowsPerChunk, [&](int64_t begin, int64_t end) {
    RmsNormRows(x, weight, eps, width, begin, end, out);
  });
  return absl::OkStatus();
}

absl::Status AddRmsNorm(float* residual, const float* delta, const float* weight, float eps, int64_t rows,
                        int64_t width, float* normed_out, ThreadPool& pool) {
  KVJIT_RETURN_IF_ERROR(CheckShape("AddRmsNorm", rows, width));
  KVJIT_RETURN_IF_ERROR(CheckPointers("AddRmsNorm", rows * width, {residual, delta, weight, normed_out}));
  pool.ParallelFor(rows, kMinNormRowsPerChunk, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin * width; i < end * width; ++i) residual[i] = residual[i] + delta[i];
    RmsNormRows(residual, weight, eps, width, begin, end, normed_out);
  });
  return absl::OkStatus();
}

absl::Status SwiGlu(const float* gate, const float* up, float* out, int64_t n, ThreadPool& pool) {
  return ElementRanges("SwiGlu", n, {gate, up, out}, pool, [&](int64_t begin, int64_t end) {
    SiluChunks(gate, begin, end, [&](int64_t i, float silu) { out[i] = silu * up[i]; });
  });
}

absl::Status SwiGluRows(const float* gate, int64_t gate_stride, const float* up, int64_t up_stride,
                        float* out, int64_t rows, int64_t width, ThreadPool& pool) {
  // One row (decode) is contiguous whatever its stride: split its elements.
  if (rows == 1) return SwiGlu(gate, up, out, width, pool);
  KVJIT_RETURN_IF_ERROR(CheckShape("SwiGlu", rows, width));
  KVJIT_RETURN_IF_ERROR(CheckPointers("SwiGlu", rows * width, {gate, up, out}));
  pool.ParallelFor(rows, MinRowsPerChunk(width), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* gate_row = gate + r * gate_stride;
      const float* up_row = up + r * up_stride;
      float* out_row = out + r * width;
      SiluChunks(gate_row, 0, width, [&](int64_t i, float silu) { out_row[i] = silu * up_row[i]; });
    }
  });
  return absl::OkStatus();
}

absl::Status Silu(const float* x, float* out, int64_t n, ThreadPool& pool) {
  return ElementRanges("Silu", n, {x, out}, pool, [&](int64_t begin, int64_t end) {
    SiluChunks(x, begin, end, [&](int64_t i, float silu) { out[i] = silu; });
  });
}

absl::Status GeluTanh(const float* x, float* out, int64_t n, ThreadPool& pool) {
  // 0.5 x (1 + tanh(u)) = x / (1 + exp(-2u)), u = sqrt(2/pi) x (1 + 0.044715 x^2).
  return ElementRanges("GeluTanh", n, {x, out}, pool, [&](int64_t begin, int64_t end) {
    float exps[kSiluChunk];
    for (int64_t first = begin; first < end; first += kSiluChunk) {
      const int64_t count = std::min(kSiluChunk, end - first);
      for (int64_t i = 0; i < count; ++i) {
        const float v = x[first + i];
        exps[i] = -1.5957691216f * v * (1.0f + 0.044715f * v * v);
      }
      FastExpRow(exps, exps, count);
      for (int64_t i = 0; i < count; ++i) out[first + i] = x[first + i] / (1.0f + exps[i]);
    }
  });
}

absl::Status Tanh(const float* x, float* out, int64_t n, ThreadPool& pool) {
  return ElementRanges("Tanh", n, {x, out}, pool, [&](int64_t begin, int64_t end) {
    float exps[kSiluChunk];
    float series[kSiluChunk];
    for (int64_t first = begin; first < end; first += kSiluChunk) {
      const int64_t count = std::min(kSiluChunk, end - first);
      const float* v = x + first;
      // Both forms of every element, then a select between values already
      // computed: loops the compiler vectorizes (it does not speculate a
      // form's arithmetic into a branch it might not take).
      for (int64_t i = 0; i < count; ++i) exps[i] = -2.0f * std::fabs(v[i]);
      FastExpRow(exps, exps, count);
      for (int64_t i = 0; i < count; ++i) {
        exps[i] = std::copysign((1.0f - exps[i]) / (1.0f + exps[i]), v[i]);
      }
      for (int64_t i = 0; i < count; ++i) {
        const float v2 = v[i] * v[i];
        series[i] =
            v[i] * (1.0f + v2 * (-1.0f / 3.0f + v2 * (2.0f / 15.0f + v2 * (-17.0f / 315.0f))));
      }
      // A quiet comparison: NaN takes the exp form's NaN.
      for (int64_t i = 0; i < count; ++i) {
        out[first + i] = std::isless(std::fabs(v[i]), 0.1f) ? series[i] : exps[i];
      }
    }
  });
}

absl::Status Add(const float* a, const float* b, float* out, int64_t n, ThreadPool& pool) {
  return ElementWise("Add", n, {a, b, out}, pool, [&](int64_t i) { out[i] = a[i] + b[i]; });
}

absl::Status Mul(const float* a, const float* b, float* out, int64_t n, ThreadPool& pool) {
  return ElementWise("Mul", n, {a, b, out}, pool, [&](int64_t i) { out[i] = a[i] * b[i]; });
}

absl::Status Scale(const float* x, float factor, float* out, int64_t n, ThreadPool& pool) {
  return ElementWise("Scale", n, {x, out}, pool, [&](int64_t i) { out[i] = x[i] * factor; });
}

absl::Status Softmax(const float* x, int64_t rows, int64_t width, float* out, ThreadPool& pool) {
  KVJIT_RETURN_IF_ERROR(CheckShape("Softmax", rows, width));
  KVJIT_RETURN_IF_ERROR(CheckPointers("Softmax", rows * width, {x, out}));
  pool.ParallelFor(rows, MinRowsPerChunk(width), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* in = x + r * width;
      float* row = out + r * width;
      float max = -std::numeric_limits<float>::infinity();
      for (int64_t i = 0; i < width; ++i) max = std::max(max, in[i]);
      double sum = 0.0;
      for (int64_t i = 0; i < width; ++i) {
        row[i] = std::exp(in[i] - max);
        sum += row[i];
      }
      const float inverse = static_cast<float>(1.0 / sum);
      for (int64_t i = 0; i < width; ++i) row[i] *= inverse;
    }
  });
  return absl::OkStatus();
}

absl::Status EmbeddingLookup(const WeightView& table, const int32_t* token_ids, int64_t count, float* out,
                             ThreadPool& pool) {
  if (count < 0) return absl::InvalidArgumentError(absl::StrCat("EmbeddingLookup: negative token count ", count));
  KVJIT_ASSIGN_OR_RETURN(const uint64_t row_bytes, CheckWeight("EmbeddingLookup", table));
  KVJIT_RETURN_IF_ERROR(CheckPointers("EmbeddingLookup", count * table.cols, {token_ids, out}));
  for (int64_t i = 0; i < count; ++i) {
    if (token_ids[i] < 0 || token_ids[i] >= table.rows) {
      return absl::OutOfRangeError(absl::StrCat("EmbeddingLookup: token id ", token_ids[i], " at ", i,
                                                " is outside the table's ", table.rows, " rows"));
    }
  }
  const int64_t width = table.cols;
  if (width == 0) return absl::OkStatus();  // rows of no blocks, nothing to write
  // In an interleaved table (MatMul.h) a row's blocks lie a group's block
  // column apart; in GGUF's rows, back to back.
  const int64_t interleaved = table.rows_interleaved;
  const int64_t blocks = interleaved == 1 ? 1 : width / quant::ElementsPerBlock(table.type);
  const uint64_t block_bytes = row_bytes / static_cast<uint64_t>(blocks);
  const int64_t block_elements = width / blocks;
  pool.ParallelFor(count, MinRowsPerChunk(width), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const int64_t row = token_ids[i];
      const uint64_t first_block = static_cast<uint64_t>(row - row % interleaved) * row_bytes +
                                   static_cast<uint64_t>(row % interleaved) * block_bytes;
      for (int64_t b = 0; b < blocks; ++b) {
        const absl::Span<const uint8_t> block =
            table.bytes.subspan(first_block + static_cast<uint64_t>(b * interleaved) * block_bytes, block_bytes);
        // Cannot fail: the block's size was checked against the table's shape above.
        quant::DequantizeRow(table.type, block,
                             absl::MakeSpan(out + i * width + b * block_elements, static_cast<size_t>(block_elements)))
            .IgnoreError();
      }
    }
  });
  return absl::OkStatus();
}

absl::Status GatherRows(const float* src, int64_t src_rows, int64_t width, const int32_t* indices, int64_t count,
                        float* out, ThreadPool& pool) {
  KVJIT_RETURN_IF_ERROR(CheckShape("GatherRows", src_rows, width));
  KVJIT_RETURN_IF_ERROR(CheckShape("GatherRows", count, width));
  KVJIT_RETURN_IF_ERROR(CheckPointers("GatherRows", count * width, {src, indices, out}));
  for (int64_t i = 0; i < count; ++i) {
    if (indices[i] < 0 || indices[i] >= src_rows) {
      return absl::OutOfRangeError(absl::StrCat("GatherRows: index ", indices[i], " at ", i,
                                                " is outside the source's ", src_rows, " rows"));
    }
  }
  pool.ParallelFor(count, MinRowsPerChunk(width), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      std::memcpy(out + i * width, src + static_cast<int64_t>(indices[i]) * width,
                  static_cast<size_t>(width) * sizeof(float));
    }
  });
  return absl::OkStatus();
}

}  // namespace kvjit::cpu
