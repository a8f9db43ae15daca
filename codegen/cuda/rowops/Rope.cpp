// The CUDA kernel of Rope (runtime/ops/Rope.cpp describes the op): one
// block per token, its inverse frequencies baked into the kernel as
// constants.

#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "codegen/cuda/rowops/RowOpEmitters.h"
#include "runtime/core/StatusMacros.h"
#include "runtime/schema/OpOperands.h"

namespace kvjit::codegen::cuda {
namespace {

constexpr char kRope[] = R"cuda(
// Rope (@STYLE@): rotary_dim @ROTARY@ of head_dim @HEAD_DIM@, theta @THETA@, scaling @SCALING@.
__constant__ float KVJIT_KERNEL_inverse_frequency[@PAIRS@] = {@FREQUENCIES@};
extern "C" __global__ void __launch_bounds__(@THREADS@)
KVJIT_KERNEL(const kvjit::cuda_abi::LaunchArgs args) {
  constexpr int kHeads = @HEADS@;
  constexpr int kHeadDim = @HEAD_DIM@;
  constexpr int kPairs = @PAIRS@;
  constexpr int kSecondOffset = @SECOND_OFFSET@;
  constexpr int kPairStride = @PAIR_STRIDE@;
  const int64_t token = blockIdx.x;
  const float position = static_cast<float>(static_cast<const int32_t*>(args.buffers[@POSITIONS@])[token]);
  const float* x = static_cast<const float*>(args.buffers[@X@]) + token * kHeads * kHeadDim;
  float* out = static_cast<float*>(args.buffers[@OUT@]) + token * kHeads * kHeadDim;
  for (int item = threadIdx.x; item < kHeads * kPairs; item += blockDim.x) {
    const int pair = item % kPairs;
    const int first = (item / kPairs) * kHeadDim + pair * kPairStride;
    float sine, cosine;
    sincosf(position * KVJIT_KERNEL_inverse_frequency[pair], &sine, &cosine);
    const float x0 = x[first];
    const float x1 = x[first + kSecondOffset];
    // Contracted as ggml (and runtime/cpu/Rope.cpp) contract it.
    out[first] = fmaf(x0, cosine, -__fmul_rn(x1, sine));
    out[first + kSecondOffset] = fmaf(x0, sine, __fmul_rn(x1, cosine));
  }
@PASS_THROUGH@}
)cuda";

// The dimensions past rotary_dim, copied where the output is not the input.
constexpr char kPassThrough[] = R"cuda(  if (out != x) {
    constexpr int kRotary = 2 * kPairs;
    constexpr int kPass = kHeadDim - kRotary;
    for (int item = threadIdx.x; item < kHeads * kPass; item += blockDim.x) {
      const int i = (item / kPass) * kHeadDim + kRotary + item % kPass;
      out[i] = x[i];
    }
  }
)cuda";

// The angle per position of each pair: freq_scale * theta^(-2i/rotary_dim)
// / divisor_i, with Llama 3.1's divisors (high frequencies kept, low ones
// divided by `factor`, the band between blended) or the stored per-pair
// factors of llama.cpp's rope_freqs tensor.
std::vector<float> InverseFrequencies(const kvx::RopeParams& rope, int64_t rotary_dim) {
  const int64_t pairs = rotary_dim / 2;
  const kvx::RopeScaling* scaling = rope.scaling();
  const kvx::RopeScalingKind kind = scaling ? scaling->kind() : kvx::RopeScalingKind::None;
  const double pi = std::acos(-1.0);
  std::vector<float> frequencies;
  for (int64_t i = 0; i < pairs; ++i) {
    const double frequency = std::pow(static_cast<double>(rope.theta()), -2.0 * i / rotary_dim);
    double divisor = 1.0;
    if (kind == kvx::RopeScalingKind::Linear) divisor = scaling->factor();
    if (kind == kvx::RopeScalingKind::Llama3) {
      const double original = scaling->original_context();
      const double wavelength = 2.0 * pi / frequency;
      if (wavelength > original / scaling->low_freq_factor()) {
        divisor = scaling->factor();
      } else if (wavelength >= original / scaling->high_freq_factor()) {
        const double smooth = (original / wavelength - scaling->low_freq_factor()) /
                              (scaling->high_freq_factor() - scaling->low_freq_factor());
        divisor = 1.0 / ((1.0 - smooth) / scaling->factor() + smooth);
      }
    }
    if (rope.freq_factors() != nullptr)
      divisor *= rope.freq_factors()->Get(static_cast<uint32_t>(i));
    frequencies.push_back(static_cast<float>(frequency / divisor));
  }
  return frequencies;
}

absl::Status CheckRope(const kvx::RopeParams* rope, int64_t rotary_dim, int64_t head_dim) {
  if (rope == nullptr)
    return absl::InvalidArgumentError("a Rope instruction without rope parameters");
  if (rotary_dim < 2 || rotary_dim % 2 != 0 || rotary_dim > head_dim) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rotary_dim ", rotary_dim, " must be even and within 2..head_dim (", head_dim, ")"));
  }
  if (!(rope->theta() > 0.0f)) {
    return absl::InvalidArgumentError(
        absl::StrCat("rope theta ", rope->theta(), " is not positive"));
  }
  const kvx::RopeScaling* scaling = rope->scaling();
  if (const flatbuffers::Vector<float>* factors = rope->freq_factors()) {
    if (scaling != nullptr && scaling->kind() == kvx::RopeScalingKind::Llama3) {
      return absl::InvalidArgumentError("rope freq_factors and llama3 scaling are exclusive");
    }
    if (static_cast<int64_t>(factors->size()) != rotary_dim / 2) {
      return absl::InvalidArgumentError(absl::StrCat(
          "rope has ", factors->size(), " freq_factors for ", rotary_dim / 2, " pairs"));
    }
    for (float factor : *factors) {
      if (!(factor > 0.0f) || std::isinf(factor)) {
        return absl::InvalidArgumentError(
            absl::StrCat("rope freq_factor ", factor, " is not positive and finite"));
      }
    }
  }
  if (scaling == nullptr || scaling->kind() == kvx::RopeScalingKind::None) return absl::OkStatus();
  if (!(scaling->factor() > 0.0f)) {
    return absl::InvalidArgumentError(
        absl::StrCat("rope scaling factor ", scaling->factor(), " is not positive"));
  }
  if (scaling->kind() == kvx::RopeScalingKind::Llama3 &&
      (!(scaling->low_freq_factor() > 0.0f) ||
       !(scaling->high_freq_factor() > scaling->low_freq_factor()) ||
       scaling->original_context() == 0)) {
    return absl::InvalidArgumentError(
        "llama3 rope scaling needs 0 < low_freq_factor < high_freq_factor and "
        "an original context");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status EmitRope(CudaRowKernelEmitter& emitter) {
  using Operand = kvx::RopeOperand;
  const kvx::TensorRef& x = kvx::InputOf(emitter.instruction(), Operand::X);
  KVJIT_ASSIGN_OR_RETURN(int64_t heads, StaticDim(x, 1, "the rope input's heads"));
  KVJIT_ASSIGN_OR_RETURN(int64_t head_dim, StaticDim(x, 2, "the rope input's head_dim"));
  const kvx::RopeParams* rope = emitter.instruction().params_as_RopeParams();
  const int64_t rotary_dim =
      rope != nullptr && rope->rotary_dim() > 0 ? rope->rotary_dim() : head_dim;
  KVJIT_RETURN_IF_ERROR(CheckRope(rope, rotary_dim, head_dim));
  const int64_t pairs = rotary_dim / 2;
  const bool neox = rope->style() == kvx::RopeStyle::NeoX;
  std::vector<std::string> literals;
  for (float frequency : InverseFrequencies(*rope, rotary_dim)) {
    literals.push_back(FloatLiteral(frequency));
  }
  const kvx::RopeScaling* scaling = rope->scaling();
  const uint32_t threads = RowThreads(heads * pairs);
  emitter.AddRowKernel(
      "rope",
      Fill(kRope, {{"STYLE", neox ? "neox" : "interleaved"},
                   {"ROTARY", absl::StrCat(rotary_dim)},
                   {"HEAD_DIM", absl::StrCat(head_dim)},
                   {"THETA", absl::StrCat(rope->theta())},
                   {"SCALING", rope->freq_factors() != nullptr
                                   ? "freq_factors"
                                   : kvx::EnumNameRopeScalingKind(
                                         scaling ? scaling->kind() : kvx::RopeScalingKind::None)},
                   {"PAIRS", absl::StrCat(pairs)},
                   {"FREQUENCIES", absl::StrJoin(literals, ", ")},
                   {"THREADS", absl::StrCat(threads)},
                   {"HEADS", absl::StrCat(heads)},
                   {"SECOND_OFFSET", absl::StrCat(neox ? pairs : 1)},
                   {"PAIR_STRIDE", absl::StrCat(neox ? 1 : 2)},
                   {"PASS_THROUGH", rotary_dim < head_dim ? kPassThrough : ""},
                   {"X", absl::StrCat(kvx::OperandIndex(Operand::X))},
                   {"POSITIONS", absl::StrCat(kvx::OperandIndex(Operand::Positions))},
                   {"OUT", absl::StrCat(emitter.OutputBuffer(0))}}),
      threads, kvx::OperandIndex(Operand::X), 1);
  return absl::OkStatus();
}

}  // namespace kvjit::codegen::cuda
