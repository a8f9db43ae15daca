#include "codegen/cuda/NvrtcCompiler.h"

#include <nvrtc.h>

#include <memory>
#include <type_traits>

#include "absl/strings/str_cat.h"

namespace kvjit::codegen::cuda {
namespace {

struct ProgramDeleter {
  void operator()(nvrtcProgram program) const { nvrtcDestroyProgram(&program); }
};
using ProgramHandle = std::unique_ptr<std::remove_pointer_t<nvrtcProgram>, ProgramDeleter>;

std::string ProgramLog(nvrtcProgram program) {
  size_t size = 0;
  if (nvrtcGetProgramLogSize(program, &size) != NVRTC_SUCCESS || size <= 1) return "";
  std::string log(size, '\0');
  if (nvrtcGetProgramLog(program, log.data()) != NVRTC_SUCCESS) return "";
  log.resize(size - 1);  // the terminating NUL
  return log;
}

absl::Status NvrtcError(nvrtcResult result, absl::string_view what, const std::string& name) {
  return absl::InternalError(
      absl::StrCat("NVRTC, ", what, " for ", name, ": ", nvrtcGetErrorString(result)));
}

}  // namespace

std::vector<std::string> NvrtcOptionList(const NvrtcOptions& options) {
  std::vector<std::string> list = {"-default-device", "--std=c++17"};
  if (options.fast_math) list.push_back("--use_fast_math");
  return list;
}

uint32_t NvrtcVersion() {
  int major = 0, minor = 0;
  if (nvrtcVersion(&major, &minor) != NVRTC_SUCCESS) return 0;
  return static_cast<uint32_t>(major * 1000 + minor * 10);
}

absl::StatusOr<NvrtcResult> CompileWithNvrtc(const std::string& source, const std::string& name,
                                             const NvrtcOptions& options, const NvrtcCache* cache) {
  NvrtcResult result;
  result.binary.arch = options.arch;
  result.binary.options = NvrtcOptionList(options);
  result.binary.nvrtc_version = NvrtcVersion();
  std::string key;
  if (cache != nullptr) {
    key = NvrtcCache::Key(source, options.arch, result.binary.options, result.binary.nvrtc_version);
    if (std::optional<CudaBinary> cached = cache->Lookup(key)) {
      result.binary.cubin = std::move(cached->cubin);
      result.binary.ptx = std::move(cached->ptx);
      result.cache_hit = true;
      return result;
    }
  }

  nvrtcProgram raw = nullptr;
  const std::string file_name = absl::StrCat(name, ".cu");
  if (nvrtcResult status =
          nvrtcCreateProgram(&raw, source.c_str(), file_name.c_str(), 0, nullptr, nullptr);
      status != NVRTC_SUCCESS) {
    return NvrtcError(status, "creating the program", name);
  }
  ProgramHandle program(raw);
  std::vector<std::string> arguments = {absl::StrCat("--gpu-architecture=sm_", options.arch)};
  arguments.insert(arguments.end(), result.binary.options.begin(), result.binary.options.end());
  std::vector<const char*> argv;
  for (const std::string& argument : arguments) argv.push_back(argument.c_str());
  const nvrtcResult compiled =
      nvrtcCompileProgram(program.get(), static_cast<int>(argv.size()), argv.data());
  if (compiled != NVRTC_SUCCESS) {
    return absl::InvalidArgumentError(
        absl::StrCat("NVRTC could not compile the CUDA kernels of ", name, " for sm_", options.arch,
                     " (", nvrtcGetErrorString(compiled), "):\n", ProgramLog(program.get())));
  }
  result.log = ProgramLog(program.get());
  size_t cubin_size = 0, ptx_size = 0;
  if (nvrtcResult status = nvrtcGetCUBINSize(program.get(), &cubin_size); status != NVRTC_SUCCESS) {
    return NvrtcError(status, "reading the cubin", name);
  }
  result.binary.cubin.resize(cubin_size);
  if (nvrtcResult status =
          nvrtcGetCUBIN(program.get(), reinterpret_cast<char*>(result.binary.cubin.data()));
      status != NVRTC_SUCCESS) {
    return NvrtcError(status, "reading the cubin", name);
  }
  if (nvrtcResult status = nvrtcGetPTXSize(program.get(), &ptx_size); status != NVRTC_SUCCESS) {
    return NvrtcError(status, "reading the PTX", name);
  }
  std::string ptx(ptx_size, '\0');
  if (nvrtcResult status = nvrtcGetPTX(program.get(), ptx.data()); status != NVRTC_SUCCESS) {
    return NvrtcError(status, "reading the PTX", name);
  }
  if (!ptx.empty() && ptx.back() == '\0') ptx.pop_back();
  result.binary.ptx = std::move(ptx);
  if (cache != nullptr) {
    // A cache that cannot be written (read-only home) costs the next
    // compile time, not this result.
    cache->Store(key, result.binary).IgnoreError();
  }
  return result;
}

}  // namespace kvjit::codegen::cuda
