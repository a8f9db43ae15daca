#ifndef KVJIT_IR_REFERENCE_REFKERNELS_H_
#define KVJIT_IR_REFERENCE_REFKERNELS_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/Reference/RefTensor.h"
#include "ir/Tfm/RopeScaling.h"

// The reference semantics of the tfm ops on plain tensors, written for
// clarity: double accumulation, no blocking, no threads. Shapes are checked
// here because dynamic dimensions are only known at evaluation time.
namespace kvjit::reference {

enum class RopePairing { kInterleaved, kNeox };
struct RopeParams {
  RopePairing pairing = RopePairing::kInterleaved;
  double theta = 10000.0;
  int64_t rotary_dim = 0;  // 0: the whole head
  RopeScaling scaling;
  // Per-pair divisors of the frequency (llama.cpp's rope_freqs); empty: none.
  std::vector<double> freq_factors;
};

// The rotation frequency (radians per position) of pair `pair` of `rotary_dim`.
double RopeFrequency(const RopeParams& params, int64_t pair, int64_t rotary_dim);

absl::StatusOr<RefTensor> Embedding(const RefTensor& table, const RefTensor& tokens);
absl::StatusOr<RefTensor> Linear(const RefTensor& input, const RefTensor& weight,
                                 const RefTensor* bias);
absl::StatusOr<RefTensor> RmsNorm(const RefTensor& input, const RefTensor& weight, double epsilon);
absl::StatusOr<RefTensor> LayerNorm(const RefTensor& input, const RefTensor& weight,
                                    const RefTensor* bias, double epsilon);
absl::StatusOr<RefTensor> Rope(const RefTensor& input, const RefTensor& positions,
                               const RopeParams& params);
absl::StatusOr<RefTensor> Matmul(const RefTensor& lhs, const RefTensor& rhs);
absl::StatusOr<RefTensor> Transpose(const RefTensor& input, const std::vector<int64_t>& permutation);
// `shape` may hold one -1, inferred from the element count.
absl::StatusOr<RefTensor> Reshape(const RefTensor& input, std::vector<int64_t> shape);
absl::StatusOr<RefTensor> Repeat(const RefTensor& input, int64_t axis, int64_t repeats);
absl::StatusOr<RefTensor> Add(const RefTensor& lhs, const RefTensor& rhs);
absl::StatusOr<RefTensor> Mul(const RefTensor& lhs, const RefTensor& rhs);
RefTensor Scale(const RefTensor& input, double factor);
RefTensor Silu(const RefTensor& input);
RefTensor Gelu(const RefTensor& input, bool approximate_tanh);
// `fn` of each element taken in double, rounded to f32: the reference of a
// unary elementwise op whose math is one expression (its reference model,
// TfmReference.cpp, passes the expression).
RefTensor MapInDouble(const RefTensor& input, double (*fn)(double x));
// An attention score soft-capped as Gemma 2 does it: cap · tanh(score / cap);
// a cap of 0 leaves the score as it is.
double SoftCap(double score, double cap);
// query [T, H, D], key/value [S, KV, D]; query i at position p = S - T + i
// when causal. A positive `window` (causal only) leaves query p the keys j
// with p - window < j <= p; 0 means no window. A positive `softcap` caps
// each scaled score with SoftCap.
absl::StatusOr<RefTensor> Attention(const RefTensor& query, const RefTensor& key,
                                    const RefTensor& value, double scale, bool causal,
                                    int64_t window = 0, double softcap = 0);
absl::StatusOr<RefTensor> GatherRows(const RefTensor& input, const RefTensor& rows);
// Columns [offset, offset + size) of each row of a [rows, features] tensor.
absl::StatusOr<RefTensor> SliceColumns(const RefTensor& input, int64_t offset, int64_t size);
// The rows of `parts`, matrices of one row length, one after the other.
absl::StatusOr<RefTensor> ConcatRows(const std::vector<const RefTensor*>& parts);

// `size` rows (axis 0) or columns (axis 1, of a matrix) of `input`, from
// index `from`.
absl::StatusOr<RefTensor> SliceAxis(const RefTensor& input, int64_t axis, int64_t from,
                                    int64_t size);
absl::StatusOr<RefTensor> Softmax(const RefTensor& input, int64_t axis);
// Masks key j of query p = keys - queries + i where j > p, and with a
// positive `window` also where j <= p - window.
absl::StatusOr<RefTensor> CausalMask(const RefTensor& input, int64_t window = 0);

}  // namespace kvjit::reference

#endif  // KVJIT_IR_REFERENCE_REFKERNELS_H_
