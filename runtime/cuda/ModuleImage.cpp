#include "runtime/cuda/ModuleImage.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace kvjit::cuda {
namespace {

std::string ArchName(const char* prefix, int arch) {
  return arch > 0 ? absl::StrCat(prefix, arch) : "none";
}

}  // namespace

absl::StatusOr<ModuleImage> ChooseModuleImage(int device_arch, int cubin_arch, int ptx_arch) {
  if (cubin_arch > 0 && cubin_arch == device_arch) return ModuleImage::kCubin;
  if (ptx_arch > 0 && ptx_arch <= device_arch) return ModuleImage::kPtx;
  return absl::FailedPreconditionError(absl::StrCat(
      "the executable's kernels do not run on this GPU (", ArchName("sm_", device_arch),
      "): its cubin is for ", ArchName("sm_", cubin_arch), " and its PTX for ",
      ArchName("compute_", ptx_arch), "; compile it again with --target cuda --sm ", device_arch));
}

}  // namespace kvjit::cuda
