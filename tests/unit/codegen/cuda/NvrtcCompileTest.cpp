// The CI check that every CUDA kernel kvjit generates compiles: the kernels
// of stories260K, SmolLM2-135M (Q4_1) and a synthetic program that reaches
// every variant, with f32 and f16 caches and (SmolLM2 and the synthetic
// program) the other KV cache types of runtime/schema/KvCacheFormat.h,
// rotated, and keys and values of different types, through NVRTC for sm_80
// and sm_90.
// No GPU is needed; a kernel that does not compile fails here with NVRTC's
// log.

#include <cctype>
#include <ostream>
#include <string>

#include "absl/strings/str_cat.h"
#include "codegen/cuda/CudaCodegen.h"
#include "codegen/cuda/NvrtcCompiler.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/codegen/cuda/CudaTestExecutables.h"
#include "tests/unit/common/TestPaths.h"

namespace kvjit::codegen::cuda {
namespace {

using ::testing::HasSubstr;

struct Case {
  const char* model;  // "synthetic", or a file under the shared or downloaded models
  const char* cache_dtype;
  uint32_t arch;
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.model << " with an " << c.cache_dtype << " cache for sm_" << c.arch;
}

std::string CaseName(const ::testing::TestParamInfo<Case>& info) {
  std::string name =
      absl::StrCat(info.param.model, "_", info.param.cache_dtype, "_sm", info.param.arch);
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return name;
}

// The executable a case generates kernels from, or "" (with `skip` set)
// where its model is absent.
std::string ExecutableFor(const Case& c, std::string* skip) {
  const std::string model = c.model;
  if (model == "synthetic") {
    // Each cache as insert-kv-cache would lay it out: the blocked types
    // rotated (KeyRotationBlock, ValueRotationBlock), f16 never.
    using kvx::StorageType;
    const std::string dtype = c.cache_dtype;
    if (dtype == "f32") return testing::SyntheticExecutable(StorageType::F32);
    if (dtype == "f16") return testing::SyntheticExecutable(StorageType::F16);
    if (dtype == "bf16") return testing::SyntheticExecutable(StorageType::BF16);
    if (dtype == "q8_0") return testing::SyntheticExecutable({StorageType::Q8_0, StorageType::Q8_0, 64, 64, 64});
    if (dtype == "q4_0") return testing::SyntheticExecutable({StorageType::Q4_0, StorageType::Q4_0, 128, 128, 64});
    if (dtype == "f8_e4m3") {
      return testing::SyntheticExecutable({StorageType::F8_E4M3, StorageType::F8_E4M3, 64, 0, 0});
    }
    if (dtype == "q8_0/f16") return testing::SyntheticExecutable({StorageType::Q8_0, StorageType::F16, 128, 128, 0});
    ADD_FAILURE() << "no synthetic cache " << dtype;
    return "";
  }
  std::string path = kvjit::testing::SharedPath(absl::StrCat("models/", model));
  if (path.empty()) path = kvjit::testing::DownloadedModelPath(model);
  if (path.empty()) {
    *skip = absl::StrCat(model,
                         " is in neither the shared folder nor ~/.cache/kvjit/models "
                         "(tools/scripts/fetch_model.sh fetches SmolLM2)");
    return "";
  }
  absl::StatusOr<std::string> bytes = testing::CompiledExecutable(path, c.cache_dtype);
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  return bytes.ok() ? *bytes : "";
}

class NvrtcCompileTest : public ::testing::TestWithParam<Case> {};

TEST_P(NvrtcCompileTest, EveryGeneratedKernelCompiles) {
  std::string skip;
  const std::string executable = ExecutableFor(GetParam(), &skip);
  if (!skip.empty()) GTEST_SKIP() << skip;
  ASSERT_FALSE(executable.empty());
  absl::StatusOr<CudaModuleSpec> module =
      GenerateCudaModule(*kvx::GetExecutable(executable.data()));
  ASSERT_TRUE(module.ok()) << module.status();

  NvrtcOptions options;
  options.arch = GetParam().arch;
  absl::StatusOr<NvrtcResult> result =
      CompileWithNvrtc(module->source, GetParam().model, options, /*cache=*/nullptr);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_FALSE(result->cache_hit);
  EXPECT_EQ(result->log, "") << "the kernels compile with warnings";
  const CudaBinary& binary = result->binary;
  EXPECT_EQ(binary.arch, GetParam().arch);
  ASSERT_GE(binary.cubin.size(), 4u);
  EXPECT_EQ(std::string(binary.cubin.begin(), binary.cubin.begin() + 4),
            "\x7f"
            "ELF");
  EXPECT_THAT(binary.ptx, HasSubstr(absl::StrCat(".target sm_", GetParam().arch)));
  for (const std::string& name : module->kernel_names) {
    EXPECT_THAT(binary.ptx, HasSubstr(absl::StrCat(".entry ", name, "(")));
  }
  EXPECT_GT(binary.nvrtc_version, 0u);
}

INSTANTIATE_TEST_SUITE_P(
    Models, NvrtcCompileTest,
    ::testing::Values(Case{"stories260K.gguf", "f32", 80}, Case{"stories260K.gguf", "f32", 90},
                      Case{"stories260K.gguf", "f16", 80}, Case{"stories260K.gguf", "f16", 90},
                      Case{"SmolLM2-135M-Instruct.Q4_1.gguf", "f32", 80},
                      Case{"SmolLM2-135M-Instruct.Q4_1.gguf", "f32", 90},
                      Case{"SmolLM2-135M-Instruct.Q4_1.gguf", "f16", 80},
                      Case{"SmolLM2-135M-Instruct.Q4_1.gguf", "f16", 90},
                      Case{"synthetic", "f32", 80}, Case{"synthetic", "f32", 90},
                      Case{"synthetic", "f16", 80}, Case{"synthetic", "f16", 90},
                      Case{"SmolLM2-135M-Instruct.Q4_1.gguf", "q8_0", 80},
                      Case{"SmolLM2-135M-Instruct.Q4_1.gguf", "q4_0", 90},
                      Case{"synthetic", "bf16", 80}, Case{"synthetic", "bf16", 90},
                      Case{"synthetic", "q8_0", 80}, Case{"synthetic", "q8_0", 90},
                      Case{"synthetic", "q4_0", 80}, Case{"synthetic", "q4_0", 90},
                      Case{"synthetic", "f8_e4m3", 80}, Case{"synthetic", "f8_e4m3", 90},
                      Case{"synthetic", "q8_0/f16", 80}, Case{"synthetic", "q8_0/f16", 90}),
    CaseName);

TEST(NvrtcCompilerTest, ACompileErrorCarriesTheLogAndNamesTheModel) {
  absl::StatusOr<NvrtcResult> result =
      CompileWithNvrtc("extern \"C\" __global__ void broken() { undefined_function(); }",
                       "broken-model", NvrtcOptions{}, nullptr);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(result.status().message(), HasSubstr("broken-model"));
  EXPECT_THAT(result.status().message(), HasSubstr("sm_90"));
  EXPECT_THAT(result.status().message(), HasSubstr("undefined_function"));
}

TEST(NvrtcCompilerTest, OptionsSayWhatWasAsked) {
  EXPECT_THAT(NvrtcOptionList({}), ::testing::ElementsAre("-default-device", "--std=c++17"));
  NvrtcOptions fast;
  fast.fast_math = true;
  EXPECT_THAT(NvrtcOptionList(fast), ::testing::Contains("--use_fast_math"));
}

}  // namespace
}  // namespace kvjit::codegen::cuda
