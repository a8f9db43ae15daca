#include "codegen/cuda/emulation/HostKernels.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "runtime/quant/Half.h"

namespace kvjit::codegen::cuda {
namespace {

constexpr char kSimtEmulator[] =
#include "codegen/cuda/emulation/SimtEmulatorText.inc"
    ;

// What lets the host compiler read the generated source: <cstdint>'s
// integer types instead of the prelude's, and the f16 conversions in C++
// instead of PTX. Each must be found, or the prelude changed under the
// emulation.
constexpr std::pair<const char*, const char*> kHostReplacements[] = {
    {"typedef signed char int8_t;\ntypedef unsigned char uint8_t;\ntypedef short int16_t;\n"
     "typedef unsigned short uint16_t;\ntypedef int int32_t;\ntypedef unsigned int uint32_t;\n"
     "typedef long long int64_t;\ntypedef unsigned long long uint64_t;\n",
     ""},
    {R"(asm("cvt.f32.f16 %0, %1;" : "=f"(value) : "h"(bits));)",
     "value = ::simt::HalfToFloat(bits);"},
    {R"(asm("cvt.rn.f16.f32 %0, %1;" : "=h"(bits) : "f"(value));)",
     "bits = ::simt::FloatToHalf(value);"},
};

constexpr char kLauncher[] = R"(
extern "C" int kvjit_simt_launch(void (*kernel)(kvjit::cuda_abi::LaunchArgs),
                                 const unsigned* grid, unsigned threads,
                                 const kvjit::cuda_abi::LaunchArgs* args, char* error,
                                 int error_bytes) {
  const std::string message = ::simt::Run([&] { kernel(*args); }, grid, threads);
  std::snprintf(error, error_bytes, "%s", message.c_str());
  return message.empty() ? 0 : 1;
}
)";

std::string HostCompiler() {
  if (const char* named = std::getenv("KVJIT_HOST_CXX"); named != nullptr && *named != '\0') {
    return named;
  }
  std::error_code error;
  if (std::filesystem::exists(KVJIT_BUILD_CXX_COMPILER, error)) return KVJIT_BUILD_CXX_COMPILER;
  return "c++";
}

// `command`'s exit status and what it printed on stdout and stderr.
std::pair<int, std::string> RunCapturing(const std::string& command) {
  std::string output;
  std::FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return {-1, "cannot start a shell"};
  char buffer[4096];
  size_t read;
  while ((read = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) output.append(buffer, read);
  return {pclose(pipe), output};
}

absl::Status LaunchAll(const HostKernels& kernels, const CudaModuleSpec& module,
                       const std::vector<LaunchSpec>& launches, const cuda_abi::LaunchArgs& args,
                       const runtime::StepSizes& sizes) {
  for (const LaunchSpec& launch : launches) {
    const std::string& name = module.kernel_names[launch.kernel];
    const int64_t grid[3] = {SizeExprProduct(launch.grid_x, sizes),
                             SizeExprProduct(launch.grid_y, sizes),
                             SizeExprProduct(launch.grid_z, sizes)};
    if (grid[0] == 0 || grid[1] == 0 || grid[2] == 0) continue;
    if (grid[0] > 0x7fffffff || grid[1] > 65535 || grid[2] > 65535) {
      return absl::OutOfRangeError(absl::StrCat(name, ": a grid of ", grid[0], " x ", grid[1],
                                                " x ", grid[2], " blocks, more than a GPU runs"));
    }
    const unsigned dims[3] = {static_cast<unsigned>(grid[0]), static_cast<unsigned>(grid[1]),
                              static_cast<unsigned>(grid[2])};
    if (absl::Status launched = kernels.Launch(name, dims, launch.block_threads, args);
        !launched.ok()) {
      return launched;
    }
  }
  return absl::OkStatus();
}

SizeExpr SizeExprOf(const flatbuffers::Vector<const kvx::SizeFactor*>* factors) {
  SizeExpr expr;
  if (factors != nullptr) {
    for (const kvx::SizeFactor* factor : *factors) expr.push_back(*factor);
  }
  return expr;
}

std::vector<LaunchSpec> LaunchesOf(
    const flatbuffers::Vector<flatbuffers::Offset<kvx::CudaLaunch>>* launches) {
  std::vector<LaunchSpec> specs;
  if (launches == nullptr) return specs;
  for (const kvx::CudaLaunch* launch : *launches) {
    specs.push_back({launch->kernel(), launch->block_threads(), SizeExprOf(launch->grid_x()),
                     SizeExprOf(launch->grid_y()), SizeExprOf(launch->grid_z())});
  }
  return specs;
}

PathSpec PathOf(const kvx::CudaPath& path) {
  PathSpec spec;
  spec.launches = LaunchesOf(path.launches());
  if (const kvx::CudaGemm* gemm = path.gemm(); gemm != nullptr) {
    spec.gemm = GemmSpec{SizeExprOf(gemm->m()), gemm->n(), gemm->k(), gemm->weight_offset(),
                         gemm->activation_offset()};
  }
  spec.epilogue = LaunchesOf(path.epilogue());
  spec.scratch_bytes = SizeExprOf(path.scratch_bytes());
  spec.scratch_fixed_bytes = path.scratch_fixed_bytes();
  return spec;
}

}  // namespace

int64_t SizeExprProduct(const SizeExpr& factors, const runtime::StepSizes& sizes) {
  int64_t product = 1;
  for (const kvx::SizeFactor& factor : factors) {
    const int64_t extent = runtime::DimExtent(factor.kind(), factor.size(), sizes);
    product *= (extent + factor.divisor() - 1) / factor.divisor();
  }
  return product;
}

absl::StatusOr<std::unique_ptr<HostKernels>> HostKernels::Build(const std::string& source) {
  std::string host_source = source;
  for (const auto& [from, to] : kHostReplacements) {
    if (host_source.find(from) == std::string::npos) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the CUDA prelude no longer holds what the host emulation replaces: ", from));
    }
    host_source = absl::StrReplaceAll(host_source, {{from, to}});
  }
  absl::StrAppend(&host_source, kLauncher);

  std::unique_ptr<HostKernels> kernels(new HostKernels());
  std::error_code error;
  std::string pattern =
      (std::filesystem::temp_directory_path(error) / "kvjit-emulation-XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr) {
    return absl::ErrnoToStatus(errno, absl::StrCat(pattern, ": cannot create a directory"));
  }
  kernels->directory_ = pattern;
  const std::string emulator_path = kernels->directory_ + "/SimtEmulator.h";
  const std::string source_path = kernels->directory_ + "/kernels.cc";
  const std::string library_path = kernels->directory_ + "/kernels.so";
  std::ofstream(emulator_path) << kSimtEmulator;
  if (!(std::ofstream(source_path) << host_source)) {
    return absl::PermissionDeniedError(absl::StrCat(source_path, ": cannot write"));
  }
  kernels->compiler_ = HostCompiler();
  const std::string command = absl::StrCat(
      kernels->compiler_, " -std=c++20 -O1 -fPIC -shared -U_FORTIFY_SOURCE -w -include ",
      emulator_path, " ", source_path, " -o ", library_path);
  const auto [status, output] = RunCapturing(command);
  if (status != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("compiling the generated kernels for the host emulation failed (", command,
                     "; set KVJIT_HOST_CXX to another C++20 compiler):\n", output.substr(0, 4000)));
  }
  kernels->library_ = dlopen(library_path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (kernels->library_ == nullptr) {
    return absl::InternalError(absl::StrCat(library_path, ": ", dlerror()));
  }
  kernels->launch_ = reinterpret_cast<Launcher>(dlsym(kernels->library_, "kvjit_simt_launch"));
  if (kernels->launch_ == nullptr) {
    return absl::InternalError(absl::StrCat(library_path, ": no kvjit_simt_launch"));
  }
  return kernels;
}

HostKernels::~HostKernels() {
  if (library_ != nullptr) dlclose(library_);
  std::error_code ignored;
  if (!directory_.empty()) std::filesystem::remove_all(directory_, ignored);
}

absl::Status HostKernels::Launch(const std::string& name, const unsigned grid[3], unsigned threads,
                                 const cuda_abi::LaunchArgs& args) const {
  auto* kernel = reinterpret_cast<void (*)(cuda_abi::LaunchArgs)>(dlsym(library_, name.c_str()));
  if (kernel == nullptr) {
    return absl::NotFoundError(absl::StrCat("no kernel ", name, " in the generated source"));
  }
  char error[256] = {};
  if (launch_(kernel, grid, threads, &args, error, sizeof error) != 0) {
    return absl::InternalError(absl::StrCat(name, ": ", error));
  }
  return absl::OkStatus();
}

absl::Status RunPathOnHost(const HostKernels& kernels, const CudaModuleSpec& module,
                           const PathSpec& path, int inputs, int outputs, cuda_abi::LaunchArgs args,
                           const runtime::StepSizes& sizes) {
  const uint64_t scratch_bytes =
      path.scratch_fixed_bytes +
      (path.scratch_bytes.empty() ? 0 : SizeExprProduct(path.scratch_bytes, sizes));
  std::vector<float> scratch(scratch_bytes / sizeof(float) + 64, std::nanf(""));
  if (scratch_bytes > 0) args.buffers[cuda_abi::ScratchBuffer(inputs, outputs)] = scratch.data();
  if (absl::Status launched = LaunchAll(kernels, module, path.launches, args, sizes);
      !launched.ok()) {
    return launched;
  }
  if (!path.gemm) return absl::OkStatus();
  const GemmSpec& gemm = *path.gemm;
  const auto* bytes = reinterpret_cast<const uint8_t*>(scratch.data());
  const auto* w = reinterpret_cast<const uint16_t*>(bytes + gemm.weight_offset);
  const auto* x = reinterpret_cast<const uint16_t*>(bytes + gemm.activation_offset);
  auto* y = static_cast<float*>(args.buffers[inputs]);
  const int64_t m = SizeExprProduct(gemm.m, sizes);
  std::vector<float> row_of_x(gemm.k);
  for (int64_t row = 0; row < m; ++row) {
    for (int64_t k = 0; k < gemm.k; ++k) row_of_x[k] = quant::HalfToFloat(x[row * gemm.k + k]);
    for (int64_t n = 0; n < gemm.n; ++n) {
      const uint16_t* w_row = w + n * gemm.k;
      float sum = 0.0f;
      for (int64_t k = 0; k < gemm.k; ++k) sum += quant::HalfToFloat(w_row[k]) * row_of_x[k];
      y[row * gemm.n + n] = sum;
    }
  }
  return LaunchAll(kernels, module, path.epilogue, args, sizes);
}

CudaModuleSpec ModuleSpecOf(const kvx::CudaModule& module) {
  CudaModuleSpec spec;
  if (module.source() != nullptr) spec.source = module.source()->str();
  if (module.kernels() != nullptr) {
    for (const kvx::CudaKernel* kernel : *module.kernels()) {
      spec.kernel_names.push_back(kernel->name()->str());
    }
  }
  if (module.instructions() != nullptr) {
    for (const kvx::CudaInstruction* instruction : *module.instructions()) {
      spec.instructions.push_back({SizeExprOf(instruction->rows()), PathOf(*instruction->decode()),
                                   PathOf(*instruction->prefill())});
    }
  }
  spec.prefill_min_rows = module.prefill_min_rows();
  return spec;
}

}  // namespace kvjit::codegen::cuda
