#include "runtime/core/BuildInfo.h"

#include "absl/strings/str_cat.h"
#include "runtime/core/BuildConfig.h"

#if KVJIT_HAVE_CUDA
#include <dlfcn.h>
#include <cuda.h>
#include <nvrtc.h>
#endif

namespace kvjit {

absl::string_view KvjitVersion() { return KVJIT_VERSION_STRING; }

std::vector<BackendInfo> CompiledBackends() {
  std::vector<BackendInfo> backends;
  backends.push_back({"cpu", "threaded; AVX2/FMA kernels where the CPU has them, portable otherwise"});
#if KVJIT_HAVE_CUDA
  // NVRTC is asked for its version by loading it here: only the compiler
  // links it, and the runtime should not pay for loading it.
  int nvrtc_major = 0;
  int nvrtc_minor = 0;
  std::string nvrtc = "NVRTC unavailable";
  const std::string library = absl::StrCat("libnvrtc.so.", CUDA_VERSION / 1000);
  if (void* handle = ::dlopen(library.c_str(), RTLD_LAZY | RTLD_LOCAL)) {
    auto version = reinterpret_cast<decltype(&nvrtcVersion)>(::dlsym(handle, "nvrtcVersion"));
    if (version != nullptr && version(&nvrtc_major, &nvrtc_minor) == NVRTC_SUCCESS) {
      nvrtc = absl::StrCat("NVRTC ", nvrtc_major, ".", nvrtc_minor);
    }
    ::dlclose(handle);
  }
  backends.push_back({"cuda", absl::StrCat("CUDA toolkit ", KVJIT_CUDA_TOOLKIT_VERSION, ", ", nvrtc,
                                           ", cuBLAS; compile --target cuda, run --device cuda "
                                           "(libcuda is loaded at run time)")});
#endif
  return backends;
}

std::string DescribeBuild() {
  std::string text = absl::StrCat("kvjit ", KvjitVersion(), "\nbackends:");
  for (const BackendInfo& backend : CompiledBackends()) {
    absl::StrAppend(&text, "\n  ", backend.name, " (", backend.detail, ")");
  }
  return text;
}

}  // namespace kvjit
