// Shows why a model built from Hugging Face safetensors uses rope style neox
// while one built from a llama GGUF uses style interleaved (see HfConfig.h):
// llama.cpp's converter permutes the q_proj/k_proj rows of each head so that
// interleaved rope on the permuted rows computes what rotate-half rope
// computes on the original rows, element for element after the same
// permutation, and so the same attention scores.

#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "tests/unit/common/NumericCompare.h"

namespace kvjit::hf {
namespace {

using ::kvjit::testing::Absolute;
using ::kvjit::testing::AllClose;

constexpr int kHeads = 2;
constexpr int kHeadDim = 8;
constexpr int kInFeatures = 3;
constexpr double kTheta = 10000.0;

using Matrix = std::vector<std::vector<double>>;  // [rows][kInFeatures]
using Vector = std::vector<double>;

double Angle(int position, int pair) { return position * std::pow(kTheta, -2.0 * pair / kHeadDim); }

// Hugging Face's rope: element i of a head turns with element i + head_dim/2.
Vector RotateHalfRope(const Vector& x, int position) {
  Vector out(x.size());
  for (int head = 0; head < static_cast<int>(x.size()) / kHeadDim; ++head) {
    const int base = head * kHeadDim;
    for (int i = 0; i < kHeadDim / 2; ++i) {
      double c = std::cos(Angle(position, i)), s = std::sin(Angle(position, i));
      double a = x[base + i], b = x[base + i + kHeadDim / 2];
      out[base + i] = a * c - b * s;
      out[base + i + kHeadDim / 2] = b * c + a * s;
    }
  }
  return out;
}

// llama.cpp's rope for llama GGUFs: element 2i of a head turns with 2i+1.
Vector InterleavedRope(const Vector& x, int position) {
  Vector out(x.size());
  for (int head = 0; head < static_cast<int>(x.size()) / kHeadDim; ++head) {
    const int base = head * kHeadDim;
    for (int i = 0; i < kHeadDim / 2; ++i) {
      double c = std::cos(Angle(position, i)), s = std::sin(Angle(position, i));
      double a = x[base + 2 * i], b = x[base + 2 * i + 1];
      out[base + 2 * i] = a * c - b * s;
      out[base + 2 * i + 1] = b * c + a * s;
    }
  }
  return out;
}

// The row order llama.cpp's converter writes: viewing each head's rows as
// [2][head_dim/2] and swapping the two axes, row 2i+j of a head comes from
// row j*head_dim/2 + i.
template <typename Rows>
Rows PermuteLikeLlamaCpp(const Rows& rows) {
  Rows permuted(rows.size());
  for (size_t head = 0; head < rows.size() / kHeadDim; ++head) {
    for (int i = 0; i < kHeadDim / 2; ++i) {
      for (int j = 0; j < 2; ++j) {
        permuted[head * kHeadDim + 2 * i + j] = rows[head * kHeadDim + j * kHeadDim / 2 + i];
      }
    }
  }
  return permuted;
}

Vector Apply(const Matrix& weight, const Vector& input) {
  Vector out;
  for (const Vector& row : weight) {
    double sum = 0;
    for (int k = 0; k < kInFeatures; ++k) sum += row[k] * input[k];
    out.push_back(sum);
  }
  return out;
}

Matrix TestWeight(double seed) {
  Matrix weight(kHeads * kHeadDim, Vector(kInFeatures));
  for (size_t r = 0; r < weight.size(); ++r) {
    for (int k = 0; k < kInFeatures; ++k) weight[r][k] = std::sin(seed + 1.7 * r + 0.31 * k);
  }
  return weight;
}

double HeadDot(const Vector& q, const Vector& k, int head) {
  double sum = 0;
  for (int d = 0; d < kHeadDim; ++d) sum += q[head * kHeadDim + d] * k[head * kHeadDim + d];
  return sum;
}

TEST(RopeStyleTest, InterleavedRopeOnPermutedRowsIsPermutedRotateHalfRope) {
  const Matrix q_proj = TestWeight(0.5);
  const Vector input = {0.3, -1.2, 0.8};
  for (int position : {0, 1, 5, 123}) {
    Vector hf = PermuteLikeLlamaCpp(RotateHalfRope(Apply(q_proj, input), position));
    Vector gguf = InterleavedRope(Apply(PermuteLikeLlamaCpp(q_proj), input), position);
    EXPECT_TRUE(AllClose(hf, gguf, Absolute(1e-12))) << "position " << position;
  }
}

TEST(RopeStyleTest, BothLayoutsGiveTheSameAttentionScores) {
  const Matrix q_proj = TestWeight(0.5), k_proj = TestWeight(2.0);
  const Vector query_input = {0.3, -1.2, 0.8}, key_input = {-0.7, 0.4, 1.1};
  const int query_position = 9, key_position = 4;
  Vector hf_q = RotateHalfRope(Apply(q_proj, query_input), query_position);
  Vector hf_k = RotateHalfRope(Apply(k_proj, key_input), key_position);
  Vector gguf_q = InterleavedRope(Apply(PermuteLikeLlamaCpp(q_proj), query_input), query_position);
  Vector gguf_k = InterleavedRope(Apply(PermuteLikeLlamaCpp(k_proj), key_input), key_position);
  Vector hf_scores, gguf_scores;
  for (int head = 0; head < kHeads; ++head) {
    hf_scores.push_back(HeadDot(hf_q, hf_k, head));
    gguf_scores.push_back(HeadDot(gguf_q, gguf_k, head));
  }
  EXPECT_TRUE(AllClose(hf_scores, gguf_scores, Absolute(1e-12)));
}

TEST(RopeStyleTest, MixingStyleAndLayoutGivesDifferentScores) {
  // Guards the test itself: with the wrong style the scores must differ.
  const Matrix q_proj = TestWeight(0.5), k_proj = TestWeight(2.0);
  const Vector input = {0.3, -1.2, 0.8};
  Vector right_q = RotateHalfRope(Apply(q_proj, input), 9);
  Vector right_k = RotateHalfRope(Apply(k_proj, input), 4);
  Vector wrong_q = InterleavedRope(Apply(q_proj, input), 9);
  Vector wrong_k = InterleavedRope(Apply(k_proj, input), 4);
  EXPECT_GT(std::abs(HeadDot(right_q, right_k, 0) - HeadDot(wrong_q, wrong_k, 0)), 1e-3);
}

}  // namespace
}  // namespace kvjit::hf
