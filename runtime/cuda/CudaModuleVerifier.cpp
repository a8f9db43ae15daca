#include "runtime/cuda/CudaModuleVerifier.h"

#include <cmath>
#include <cstring>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "runtime/core/StatusMacros.h"
#include "runtime/cuda/CollectiveLayout.h"
#include "runtime/schema/CudaLaunchAbi.h"
#include "runtime/schema/OpOperands.h"

namespace kvjit::cuda {
namespace {

// The extent of a per-step size at its largest: T, L and S are bounded by
// the program's tokens per step; block-table columns only by the runtime's
// pool, so limits on them cannot be checked here (0 leaves them out).
int64_t LargestExtent(kvx::DimKind kind, int64_t static_size, int64_t max_tokens) {
  switch (kind) {
    case kvx::DimKind::Static:
      return static_size;
    case kvx::DimKind::SequencesPlusOne:
      return max_tokens + 1;
    case kvx::DimKind::MaxBlocks:
      return 0;
    default:
      return max_tokens;
  }
}

// Checks a list of size factors: divisors of at least 1, static sizes not
// negative, and a product at the largest step within `limit` (where limit
// is positive). `what` names the list in messages.
absl::Status VerifySizeFactors(const flatbuffers::Vector<const kvx::SizeFactor*>* factors,
                               int64_t max_tokens, int64_t limit, const std::string& what) {
  if (factors == nullptr) return absl::OkStatus();
  double largest = 1.0;
  for (const kvx::SizeFactor* factor : *factors) {
    if (factor->divisor() == 0)
      return absl::InvalidArgumentError(absl::StrCat(what, " divides by 0"));
    if (factor->kind() > kvx::DimKind::MAX) {
      return absl::InvalidArgumentError(absl::StrCat(what, " has an unknown dimension kind"));
    }
    if (factor->kind() == kvx::DimKind::Static && factor->size() < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " has a negative size ", factor->size()));
    }
    const double extent =
        static_cast<double>(LargestExtent(factor->kind(), factor->size(), max_tokens));
    largest *= std::ceil(extent / factor->divisor());
  }
  if (limit > 0 && largest > static_cast<double>(limit)) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " reaches ", largest, " at the largest step, over the limit of ", limit));
  }
  return absl::OkStatus();
}

absl::Status VerifyCudaPath(const runtime::Executable& executable, const kvx::CudaPath* path,
                           const kvx::Instruction& instruction, size_t index, const char* name) {
  const std::string where =
      absl::StrCat(executable.path(), ": cuda instruction ", index, " (", kvx::EnumNameOpCode(instruction.op()),
                   ") ", name, " path");
  if (path == nullptr) return absl::InvalidArgumentError(absl::StrCat(where, " is missing"));
  const int64_t max_tokens = executable.program().max_tokens();
  const uint32_t kernels = executable.cuda()->kernels()->size();
  auto verify_launches = [&](const auto* launches, const char* role) -> absl::Status {
    if (launches == nullptr) return absl::OkStatus();
    for (size_t j = 0; j < launches->size(); ++j) {
      const kvx::CudaLaunch& launch = *launches->Get(j);
      const std::string what = absl::StrCat(where, ", ", role, " ", j);
      if (launch.kernel() >= kernels) {
        return absl::InvalidArgumentError(
            absl::StrCat(what, ": kernel ", launch.kernel(), " of ", kernels));
      }
      if (launch.block_threads() == 0 || launch.block_threads() > 1024) {
        return absl::InvalidArgumentError(
            absl::StrCat(what, ": ", launch.block_threads(), " threads per block, not 1 to 1024"));
      }
      KVJIT_RETURN_IF_ERROR(VerifySizeFactors(launch.grid_x(), max_tokens, (int64_t{1} << 31) - 1,
                                              absl::StrCat(what, ": grid x")));
      KVJIT_RETURN_IF_ERROR(
          VerifySizeFactors(launch.grid_y(), max_tokens, 65535, absl::StrCat(what, ": grid y")));
      KVJIT_RETURN_IF_ERROR(
          VerifySizeFactors(launch.grid_z(), max_tokens, 65535, absl::StrCat(what, ": grid z")));
    }
    return absl::OkStatus();
  };
  KVJIT_RETURN_IF_ERROR(verify_launches(path->launches(), "launch"));
  KVJIT_RETURN_IF_ERROR(verify_launches(path->epilogue(), "epilogue launch"));
  KVJIT_RETURN_IF_ERROR(
      VerifySizeFactors(path->scratch_bytes(), max_tokens, 0, absl::StrCat(where, ": scratch")));
  if (const kvx::CudaGemm* gemm = path->gemm()) {
    if (instruction.op() != kvx::OpCode::Linear) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": only a Linear has a GEMM"));
    }
    const kvx::TensorRef& weight = kvx::InputOf(instruction, kvx::LinearOperand::Weight);
    const auto* shape = executable.root().weights()->Get(weight.index())->shape();
    if (gemm->m() == nullptr || gemm->m()->size() == 0 || gemm->n() != shape->Get(0) ||
        gemm->k() != shape->Get(1)) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": the GEMM is not [m, k] x [n, k] over the weight's [",
                       shape->Get(0), ", ", shape->Get(1), "]"));
    }
    KVJIT_RETURN_IF_ERROR(
        VerifySizeFactors(gemm->m(), max_tokens, 0, absl::StrCat(where, ": GEMM rows")));
    if (gemm->weight_offset() % cuda_abi::kScratchAlignment != 0 ||
        gemm->activation_offset() % cuda_abi::kScratchAlignment != 0) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": GEMM operands are not ",
                                                     cuda_abi::kScratchAlignment, "-byte aligned"));
    }
    // The f16 weight lies in the fixed part of the scratch, the activation
    // (which grows with the step) after it.
    const uint64_t weight_bytes = uint64_t{gemm->n()} * gemm->k() * 2;
    if (gemm->activation_offset() < gemm->weight_offset() + weight_bytes ||
        path->scratch_fixed_bytes() < gemm->activation_offset() ||
        path->scratch_bytes() == nullptr || path->scratch_bytes()->size() == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": the GEMM's f16 weight and activation do not fit its scratch, in that order"));
    }
  } else if (IsCollective(instruction.op())) {
    // A collective's epilogue runs after the collective (CollectiveLayout.h),
    // whose scratch the path must hold at the largest step.
    const runtime::StepSizes largest = {max_tokens, max_tokens, max_tokens, 0};
    KVJIT_ASSIGN_OR_RETURN(const CollectiveCall call, PlanCollective(instruction, largest));
    if (runtime::ScratchBytes(*path, largest) < call.scratch_bytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": ", runtime::ScratchBytes(*path, largest), " bytes of scratch at the largest "
          "step, and the collective needs ", call.scratch_bytes));
    }
  } else if (path->epilogue() != nullptr && path->epilogue()->size() > 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": an epilogue without a GEMM or a collective"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status VerifyCudaModule(const runtime::Executable& executable) {
  const kvx::CudaModule* module = executable.cuda();
  if (module == nullptr) return absl::OkStatus();
  auto invalid = [&](auto... parts) {
    return absl::InvalidArgumentError(absl::StrCat(executable.path(), ": cuda module: ", parts...));
  };
  // The kernels read GGUF's rows; the compiler chooses CPU layouts only for
  // --target cpu.
  for (const kvx::Weight* weight : *executable.root().weights()) {
    if (weight->layout() != kvx::WeightLayout::Gguf) {
      return invalid("weight '", weight->name()->str(), "' has layout ",
                     kvx::EnumNameWeightLayout(weight->layout()),
                     ", but the CUDA kernels read GGUF's rows; recompile with --target cuda");
    }
  }
  if (module->abi_version() != cuda_abi::kKernelAbiVersion) {
    return invalid("kernel ABI version ", module->abi_version(), " is not this runtime's ",
                   cuda_abi::kKernelAbiVersion, "; recompile the model with this kvjit");
  }
  if (module->arch() < 50) return invalid("architecture sm_", module->arch(), " is not one");
  const bool has_cubin = module->cubin() != nullptr && module->cubin()->size() > 0;
  if (!has_cubin && (module->ptx() == nullptr || module->ptx()->size() == 0)) {
    return invalid("has neither a cubin nor PTX");
  }
  if (has_cubin && (module->cubin()->size() < 4 ||
                    std::memcmp(module->cubin()->data(), "\x7f" "ELF", 4) != 0)) {
    return invalid("the cubin is not an ELF image");
  }
  if (module->kernels() == nullptr || module->kernels()->size() == 0) {
    return invalid("has no kernels");
  }
  std::set<std::string> names;
  for (const kvx::CudaKernel* kernel : *module->kernels()) {
    if (kernel->name()->size() == 0 || !names.insert(kernel->name()->str()).second) {
      return invalid("kernel name '", kernel->name()->str(), "' is empty or repeated");
    }
  }
  const auto& instructions = *executable.program().instructions();
  if (module->instructions() == nullptr || module->instructions()->size() != instructions.size()) {
    return invalid(module->instructions() ? module->instructions()->size() : 0,
                   " instructions for a program of ", instructions.size());
  }
  if (module->prefill_min_rows() == 0) return invalid("prefill_min_rows is zero");
  for (size_t i = 0; i < instructions.size(); ++i) {
    const kvx::Instruction& instruction = *instructions[i];
    const int buffers = static_cast<int>(
        instruction.inputs()->size() + (instruction.outputs() ? instruction.outputs()->size() : 0));
    if (cuda_abi::ScratchBuffer(buffers, 0) >= cuda_abi::kMaxLaunchBuffers) {
      return invalid("instruction ", i, " has ", buffers, " buffers; kernels take at most ",
                     cuda_abi::kMaxLaunchBuffers - 2);
    }
    const kvx::CudaInstruction& launch = *module->instructions()->Get(i);
    KVJIT_RETURN_IF_ERROR(
        VerifySizeFactors(launch.rows(), executable.program().max_tokens(), 0,
                          absl::StrCat(executable.path(), ": cuda instruction ", i, " rows")));
    KVJIT_RETURN_IF_ERROR(VerifyCudaPath(executable, launch.decode(), instruction, i, "decode"));
    KVJIT_RETURN_IF_ERROR(VerifyCudaPath(executable, launch.prefill(), instruction, i, "prefill"));
  }
  return absl::OkStatus();
}

}  // namespace kvjit::cuda
