#include "ir/Reference/RefKernels.h"

#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace kvjit::reference {
namespace {

absl::Status ShapeError(const char* op, const std::string& detail) {
  return absl::InvalidArgumentError(absl::StrCat("tfm.", op, ": ", detail));
}

absl::Status ExpectRank(const char* op, const char* operand, const RefTensor& tensor,
                        size_t rank) {
  if (tensor.shape.size() == rank) return absl::OkStatus();
  return ShapeError(op, absl::StrCat(operand, " has shape ", tensor.ShapeString(),
                                     ", expected rank ", rank));
}

// Row-major strides of `shape`.
std::vector<int64_t> Strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (int64_t i = static_cast<int64_t>(shape.size()) - 2; i >= 0; --i) {
    strides[i] = strides[i + 1] * shape[i + 1];
  }
  return strides;
}

template <typename Fn>
absl::StatusOr<RefTensor> Elementwise(const char* op, const RefTensor& lhs, const RefTensor& rhs,
                                      Fn fn) {
  if (lhs.shape != rhs.shape) {
    return ShapeError(op, absl::StrCat("operands differ in shape: ", lhs.ShapeString(), " vs ",
                                       rhs.ShapeString()));
  }
  RefTensor out = RefTensor::Float(lhs.shape, std::vector<float>(lhs.values.size()));
  for (size_t i = 0; i < out.values.size(); ++i) out.values[i] = fn(lhs.values[i], rhs.values[i]);
  return out;
}

template <typename Fn>
RefTensor Map(const RefTensor& input, Fn fn) {
  RefTensor out = RefTensor::Float(input.shape, std::vector<float>(input.values.size()));
  for (size_t i = 0; i < out.values.size(); ++i) out.values[i] = fn(input.values[i]);
  return out;
}

}  // namespace

double RopeFrequency(const RopeParams& params, int64_t pair, int64_t rotary_dim) {
  double frequency = std::pow(params.theta, -2.0 * static_cast<double>(pair) / rotary_dim);
  if (!params.freq_factors.empty()) return frequency / params.freq_factors[pair];
  const RopeScaling& scaling = params.scaling;
  switch (scaling.kind) {
    case RopeScalingKind::kNone:
      return frequency;
    case RopeScalingKind::kLinear:
      return frequency / scaling.factor;
    case RopeScalingKind::kLlama3: {
      const double wavelength = 2 * M_PI / frequency;
      const double low_freq_wavelength = scaling.original_context / scaling.low_freq_factor;
      const double high_freq_wavelength = scaling.original_context / scaling.high_freq_factor;
      if (wavelength < high_freq_wavelength) return frequency;
      if (wavelength > low_freq_wavelength) return frequency / scaling.factor;
      const double smooth = (scaling.original_context / wavelength - scaling.low_freq_factor) /
                            (scaling.high_freq_factor - scaling.low_freq_factor);
      return (1 - smooth) * frequency / scaling.factor + smooth * frequency;
    }
  }
  return frequency;
}

absl::StatusOr<RefTensor> Embedding(const RefTensor& table, const RefTensor& tokens) {
  if (absl::Status s = ExpectRank("embedding", "table", table, 2); !s.ok()) return s;
  const int64_t vocab = table.shape[0];
  const int64_t width = table.shape[1];
  const int64_t count = static_cast<int64_t>(tokens.ints.size());
  RefTensor out = RefTensor::Float({count, width}, std::vector<float>(count * width));
  for (int64_t t = 0; t < count; ++t) {
    int32_t id = tokens.ints[t];
    if (id < 0 || id >= vocab) {
      return ShapeError("embedding", absl::StrCat("token id ", id, " at index ", t,
                                                  " is outside the vocabulary of ", vocab));
    }
    std::copy_n(table.values.begin() + id * width, width, out.values.begin() + t * width);
  }
  return out;
}

absl::StatusOr<RefTensor> Linear(const RefTensor& input, const RefTensor& weight,
                                 const RefTensor* bias) {
  if (absl::Status s = ExpectRank("linear", "input", input, 2); !s.ok()) return s;
  if (absl::Status s = ExpectRank("linear", "weight", weight, 2); !s.ok()) return s;
  const int64_t tokens = input.shape[0];
  const int64_t in = input.shape[1];
  const int64_t out_features = weight.shape[0];
  if (weight.shape[1] != in) {
    return ShapeError("linear", absl::StrCat("weight ", weight.ShapeString(), " does not take input ",
                                             input.ShapeString()));
  }
  RefTensor out =
      RefTensor::Float({tokens, out_features}, std::vector<float>(tokens * out_features));
  for (int64_t t = 0; t < tokens; ++t) {
    const float* x = &input.values[t * in];
    for (int64_t o = 0; o < out_features; ++o) {
      const float* w = &weight.values[o * in];
      double sum = bias ? bias->values[o] : 0.0;
      for (int64_t i = 0; i < in; ++i) sum += static_cast<double>(x[i]) * w[i];
      out.values[t * out_features + o] = static_cast<float>(sum);
    }
  }
  return out;
}

absl::StatusOr<RefTensor> RmsNorm(const RefTensor& input, const RefTensor& weight,
                                  double epsilon) {
  const int64_t width = input.shape.back();
  if (weight.element_count() != width) {
    return ShapeError("rms_norm", absl::StrCat("weight ", weight.ShapeString(),
                                               " does not match input ", input.ShapeString()));
  }
  RefTensor out = RefTensor::Float(input.shape, std::vector<float>(input.values.size()));
  for (size_t row = 0; row * width < input.values.size(); ++row) {
    const float* x = &input.values[row * width];
    double sum_squares = 0;
    for (int64_t i = 0; i < width; ++i) sum_squares += static_cast<double>(x[i]) * x[i];
    const double inverse_rms = 1.0 / std::sqrt(sum_squares / width + epsilon);
    for (int64_t i = 0; i < width; ++i) {
      out.values[row * width + i] = static_cast<float>(x[i] * inverse_rms * weight.values[i]);
    }
  }
  return out;
}

absl::StatusOr<RefTensor> LayerNorm(const RefTensor& input, const RefTensor& weight,
                                    const RefTensor* bias, double epsilon) {
  const int64_t width = input.shape.back();
  if (weight.element_count() != width || (bias && bias->element_count() != width)) {
    return ShapeError("layer_norm", absl::StrCat("weight or bias does not match input ",
                                                 input.ShapeString()));
  }
  RefTensor out = RefTensor::Float(input.shape, std::vector<float>(input.values.size()));
  for (size_t row = 0; row * width < input.values.size(); ++row) {
    const float* x = &input.values[row * width];
    double mean = 0;
    for (int64_t i = 0; i < width; ++i) mean += x[i];
    mean /= width;
    double variance = 0;
    for (int64_t i = 0; i < width; ++i) variance += (x[i] - mean) * (x[i] - mean);
    variance /= width;
    const double inverse_std = 1.0 / std::sqrt(variance + epsilon);
    for (int64_t i = 0; i < width; ++i) {
      double y = (x[i] - mean) * inverse_std * weight.values[i] + (bias ? bias->values[i] : 0.0);
      out.values[row * width + i] = static_cast<float>(y);
    }
  }
  return out;
}

absl::StatusOr<RefTensor> Rope(const RefTensor& input, const RefTensor& positions,
                               const RopeParams& params) {
  if (absl::Status s = ExpectRank("rope", "input", input, 3); !s.ok()) return s;
  const int64_t tokens = input.shape[0];
  const int64_t heads = input.shape[1];
  const int64_t head_dim = input.shape[2];
  if (static_cast<int64_t>(positions.ints.size()) != tokens) {
    return ShapeError("rope", absl::StrCat(positions.ints.size(), " positions for ", tokens,
                                           " tokens"));
  }
  const int64_t rotary_dim = params.rotary_dim > 0 ? params.rotary_dim : head_dim;
  const int64_t half = rotary_dim / 2;
  RefTensor out = input;
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t pair = 0; pair < half; ++pair) {
      const double angle = positions.ints[t] * RopeFrequency(params, pair, rotary_dim);
      const double cos_a = std::cos(angle);
      const double sin_a = std::sin(angle);
      const int64_t first = params.pairing == RopePairing::kInterleaved ? 2 * pair : pair;
      const int64_t second = params.pairing == RopePairing::kInterleaved ? 2 * pair + 1 : pair + half;
      for (int64_t h = 0; h < heads; ++h) {
        const int64_t base = (t * heads + h) * head_dim;
        const double x0 = input.values[base + first];
        const double x1 = input.values[base + second];
        out.values[base + first] = static_cast<float>(x0 * cos_a - x1 * sin_a);
        out.values[base + second] = static_cast<float>(x0 * sin_a + x1 * cos_a);
      }
    }
  }
  return out;
}

absl::StatusOr<RefTensor> Matmul(const RefTensor& lhs, const RefTensor& rhs) {
  const size_t rank = lhs.shape.size();
  if (rank < 2 || rhs.shape.size() != rank ||
      !std::equal(lhs.shape.begin(), lhs.shape.end() - 2, rhs.shape.begin()) ||
      lhs.shape[rank - 1] != rhs.shape[rank - 2]) {
    return ShapeError("matmul", absl::StrCat("cannot multiply ", lhs.ShapeString(), " by ",
                                             rhs.ShapeString()));
  }
  const int64_t m = lhs.shape[rank - 2];
  const int64_t k = lhs.shape[rank - 1];
  const int64_t n = rhs.shape[rank - 1];
  int64_t batch = 1;
  for (size_t i = 0; i + 2 < rank; ++i) batch *= lhs.shape[i];
  std::vector<int64_t> shape(lhs.shape.begin(), lhs.shape.end() - 2);
  shape.push_back(m);
  shape.push_back(n);
  RefTensor out = RefTensor::Float(shape, std::vector<float>(batch * m * n));
  for (int64_t b = 0; b < batch; ++b) {
    const float* a = &lhs.values[b * m * k];
    const float* c = &rhs.values[b * k * n];
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0;
        for (int64_t p = 0; p < k; ++p) sum += static_cast<double>(a[i * k + p]) * c[p * n + j];
        out.values[(b * m + i) * n + j] = static_cast<float>(sum);
      }
    }
  }
  return out;
}

absl::StatusOr<RefTensor> Transpose(const RefTensor& input,
                                    const std::vector<int64_t>& permutation) {
  const size_t rank = input.shape.size();
  if (permutation.size() != rank) {
    return ShapeError("transpose", absl::StrCat("permutation of ", permutation.size(),
                                                " for rank ", rank));
  }
  std::vector<int64_t> shape(rank);
  for (size_t i = 0; i < rank; ++i) shape[i] = input.shape[permutation[i]];
  const std::vector<int64_t> in_strides = Strides(input.shape);
  const std::vector<int64_t> out_strides = Strides(shape);
  RefTensor out = RefTensor::Float(shape, std::vector<float>(input.values.size()));
  for (int64_t flat = 0; flat < static_cast<int64_t>(out.values.size()); ++flat) {
    int64_t source = 0;
    int64_t rest = flat;
    for (size_t i = 0; i < rank; ++i) {
      const int64_t index = rest / out_strides[i];
      rest %= out_strides[i];
      source += index * in_strides[permutation[i]];
    }
    out.values[flat] = input.values[source];
  }
  return out;
}

absl::StatusOr<RefTensor> Reshape(const RefTensor& input, std::vector<int64_t> shape) {
  int64_t known = 1;
  int64_t inferred = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] < 0) {
      inferred = static_cast<int64_t>(i);
    } else {
      known *= shape[i];
    }
  }
  const int64_t count = input.element_count();
  if (inferred >= 0 && known > 0) shape[inferred] = count / known;
  RefTensor out = input;
  out.shape = shape;
  if (out.element_count() != count) {
    return ShapeError("reshape", absl::StrCat(input.ShapeString(), " cannot become [",
                                              absl::StrJoin(shape, "x"), "]"));
  }
  return out;
}

absl::StatusOr<RefTensor> Repeat(const RefTensor& input, int64_t axis, int64_t repeats) {
  if (axis < 0 || axis >= static_cast<int64_t>(input.shape.size()) || repeats < 1) {
    return ShapeError("repeat", absl::StrCat("axis ", axis, " repeats ", repeats, " on ",
                                             input.ShapeString()));
  }
  int64_t outer = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= input.shape[i];
  int64_t inner = 1;
  for (size_t i = axis + 1; i < input.shape.size(); ++i) inner *= input.shape[i];
  const int64_t dim = input.shape[axis];
  std::vector<int64_t> shape = input.shape;
  shape[axis] *= repeats;
  RefTensor out = RefTensor::Float(shape, {});
  out.values.reserve(input.values.size() * repeats);
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t d = 0; d < dim; ++d) {
      const auto begin = input.values.begin() + (o * dim + d) * inner;
      for (int64_t r = 0; r < repeats; ++r) out.values.insert(out.values.end(), begin, begin + inner);
    }
  }
  return out;
}

absl::StatusOr<RefTensor> Add(const RefTensor& lhs, const RefTensor& rhs) {
  return Elementwise("add", lhs, rhs, [](float a, float b) { return a + b; });
}

absl::StatusOr<RefTensor> Mul(const RefTensor& lhs, const RefTensor& rhs) {
  return Elementwise("mul", lhs, rhs, [](float a, float b) { return a * b; });
}

RefTensor Scale(const RefTensor& input, double factor) {
  return Map(input, [factor](float x) { return static_cast<float>(x * factor); });
}

RefTensor Silu(const RefTensor& input) {
  return Map(input, [](float x) { return static_cast<float>(x / (1.0 + std::exp(-double{x}))); });
}

RefTensor Gelu(const RefTensor& input, bool approximate_tanh) {
  if (approximate_tanh) {
    return Map(input, [](float x) {
      const double inner = std::sqrt(2.0 / M_PI) * (x + 0.044715 * double{x} * x * x);
      return static_cast<float>(0.5 * x * (1.0 + std::tanh(inner)));
    });
  }
  return Map(input, [](float x) {
    return static_cast<float>(0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))));
  });
}

RefTensor MapInDouble(const RefTensor& input, double (*fn)(double x)) {
  return Map(input, [fn](float x) { return static_cast<float>(fn(double{x})); });
}

double SoftCap(double score, double cap) { return cap > 0 ? cap * std::tanh(score / cap) : score; }

absl::StatusOr<RefTensor> Attention(const RefTensor& query, const RefTensor& key,
                                    const RefTensor& value, double scale, bool causal,
                                    int64_t window, double softcap) {
  if (query.shape.size() != 3 || key.shape.size() != 3 || key.shape != value.shape ||
      query.shape[2] != key.shape[2] || key.shape[1] == 0 || query.shape[1] % key.shape[1] != 0) {
    return ShapeError("attention", absl::StrCat("query ", query.ShapeString(), ", key ",
                                                key.ShapeString(), ", value ",
                                                value.ShapeString(), " do not fit"));
  }
  const int64_t queries = query.shape[0], heads = query.shape[1], dim = query.shape[2];
  const int64_t keys = key.shape[0], kv_heads = key.shape[1], group = heads / kv_heads;
  RefTensor out = RefTensor::Float(query.shape, std::vector<float>(query.values.size()));
  std::vector<double> scores(keys);
  for (int64_t i = 0; i < queries; ++i) {
    const int64_t visible = causal ? std::min(keys, keys - queries + i + 1) : keys;
    const int64_t first = causal && window > 0 ? std::max<int64_t>(0, visible - window) : 0;
    for (int64_t h = 0; h < heads; ++h) {
      const int64_t kv = h / group;
      const float* q = &query.values[(i * heads + h) * dim];
      double max_score = -std::numeric_limits<double>::infinity();
      for (int64_t j = first; j < visible; ++j) {
        const float* k = &key.values[(j * kv_heads + kv) * dim];
        double dot = 0;
        for (int64_t e = 0; e < dim; ++e) dot += static_cast<double>(q[e]) * k[e];
        scores[j] = SoftCap(dot * scale, softcap);
        max_score = std::max(max_score, scores[j]);
      }
      double sum = 0;
      for (int64_t j = first; j < visible; ++j) sum += (scores[j] = std::exp(scores[j] - max_score));
      float* o = &out.values[(i * heads + h) * dim];
      for (int64_t e = 0; e < dim; ++e) {
        double acc = 0;
        for (int64_t j = first; j < visible; ++j) {
          acc += scores[j] / sum * value.values[(j * kv_heads + kv) * dim + e];
        }
        o[e] = static_cast<float>(acc);
      }
    }
  }
  return out;
}

absl::StatusOr<RefTensor> SliceColumns(const RefTensor& input, int64_t offset, int64_t size) {
  if (absl::Status s = ExpectRank("slice_columns", "input", input, 2); !s.ok()) return s;
  const int64_t rows = input.shape[0];
  const int64_t width = input.shape[1];
  if (offset < 0 || size < 1 || offset + size > width) {
    return ShapeError("slice_columns", absl::StrCat("columns [", offset, ", ", offset + size,
                                                    ") are not within ", width));
  }
  RefTensor out = RefTensor::Float({rows, size}, std::vector<float>(rows * size));
  for (int64_t r = 0; r < rows; ++r) {
    std::copy_n(input.values.begin() + r * width + offset, size, out.values.begin() + r * size);
  }
  return out;
}

absl::StatusOr<RefTensor> ConcatRows(const std::vector<const RefTensor*>& parts) {
  if (parts.empty()) return ShapeError("concat", "there is nothing to concatenate");
  int64_t rows = 0;
  for (const RefTensor* part : parts) {
    if (absl::Status s = ExpectRank("concat", "part", *part, 2); !s.ok()) return s;
    if (part->shape[1] != parts.front()->shape[1]) {
      return ShapeError("concat", absl::StrCat("rows of ", part->shape[1], " and of ",
                                               parts.front()->shape[1], " elements"));
    }
    rows += part->shape[0];
  }
  RefTensor out = RefTensor::Float({rows, parts.front()->shape[1]}, {});
  out.values.reserve(rows * parts.front()->shape[1]);
  for (const RefTensor* part : parts) {
    out.values.insert(out.values.end(), part->values.begin(), part->values.end());
  }
  return out;
}

absl::StatusOr<RefTensor> SliceAxis(const RefTensor& input, int64_t axis, int64_t from,
                                    int64_t size) {
  const int64_t rank = static_cast<int64_t>(input.shape.size());
  if (axis < 0 || axis >= rank || axis > 1 || from < 0 || size < 0 ||
      from + size > input.shape[axis]) {
    return ShapeError("slice", absl::StrCat(size, " elements from ", from, " of axis ", axis,
                                            " of ", input.ShapeString()));
  }
  const int64_t rows = rank == 0 ? 1 : input.shape[0];
  const int64_t width = rank <= 1 ? 1 : input.element_count() / rows;
  std::vector<int64_t> shape = input.shape;
  shape[axis] = size;
  RefTensor out = RefTensor::Float(shape, {});
  if (axis == 0) {
    out.values.assign(input.values.begin() + from * width,
                      input.values.begin() + (from + size) * width);
    return out;
  }
  out.values.reserve(rows * size);
  for (int64_t r = 0; r < rows; ++r) {
    const auto row = input.values.begin() + r * width;
    out.values.insert(out.values.end(), row + from, row + from + size);
  }
  return out;
}

absl::StatusOr<RefTensor> GatherRows(const RefTensor& input, const RefTensor& rows) {
  if (absl::Status s = ExpectRank("gather_rows", "input", input, 2); !s.ok()) return s;
  const int64_t width = input.shape[1];
  const int64_t count = static_cast<int64_t>(rows.ints.size());
  RefTensor out = RefTensor::Float({count, width}, std::vector<float>(count * width));
  for (int64_t i = 0; i < count; ++i) {
    const int32_t row = rows.ints[i];
    if (row < 0 || row >= input.shape[0]) {
      return ShapeError("gather_rows", absl::StrCat("row ", row, " is outside the input's ",
                                                    input.shape[0], " rows"));
    }
    std::copy_n(input.values.begin() + row * width, width, out.values.begin() + i * width);
  }
  return out;
}

absl::StatusOr<RefTensor> Softmax(const RefTensor& input, int64_t axis) {
  const int64_t rank = static_cast<int64_t>(input.shape.size());
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) {
    return ShapeError("softmax", absl::StrCat("axis out of range for ", input.ShapeString()));
  }
  int64_t outer = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= input.shape[i];
  int64_t inner = 1;
  for (int64_t i = axis + 1; i < rank; ++i) inner *= input.shape[i];
  const int64_t dim = input.shape[axis];
  RefTensor out = input;
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t in = 0; in < inner; ++in) {
      auto at = [&](int64_t d) -> float& { return out.values[(o * dim + d) * inner + in]; };
      double max_value = -std::numeric_limits<double>::infinity();
      for (int64_t d = 0; d < dim; ++d) max_value = std::max<double>(max_value, at(d));
      double sum = 0;
      for (int64_t d = 0; d < dim; ++d) sum += std::exp(at(d) - max_value);
      for (int64_t d = 0; d < dim; ++d) at(d) = static_cast<float>(std::exp(at(d) - max_value) / sum);
    }
  }
  return out;
}

absl::StatusOr<RefTensor> CausalMask(const RefTensor& input, int64_t window) {
  const size_t rank = input.shape.size();
  if (rank < 2) return ShapeError("causal_mask", "input needs [..., queries, keys]");
  const int64_t queries = input.shape[rank - 2];
  const int64_t keys = input.shape[rank - 1];
  const int64_t offset = keys - queries;
  RefTensor out = input;
  const int64_t planes = input.element_count() / (queries * keys);
  for (int64_t p = 0; p < planes; ++p) {
    for (int64_t q = 0; q < queries; ++q) {
      for (int64_t k = offset + q + 1; k < keys; ++k) {
        out.values[(p * queries + q) * keys + k] = -std::numeric_limits<float>::infinity();
      }
      const int64_t first_in_window = window > 0 ? offset + q - window + 1 : 0;
      for (int64_t k = 0; k < std::min(first_in_window, keys); ++k) {
        out.values[(p * queries + q) * keys + k] = -std::numeric_limits<float>::infinity();
      }
    }
  }
  return out;
}

}  // namespace kvjit::reference
