// Random-weight Llama 3.1/3.2 and Qwen3 GGUFs (tools/scripts/
// make_random_gguf_model.py, written at test time with llama.cpp's gguf
// package), greedy, against llama.cpp's ids and top-5 logits on the same files
// (tests/data/llamacpp/random_*_greedy.json, made by
// tools/scripts/llamacpp_reference.py). The weights are f32 and both KV caches
// f16; what separates the two runs is where each rounds attention's operands
// to f16 and the order of its f32 sums. Measured: at most 1.7e-4 (llama3),
// 1.5e-3 (llama3 tied) and 5.4e-4 (qwen3) on logits up to ~17, i.e. under
// 1e-4 of the largest, about f16's half-ulp; the greedy ids are equal.

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "codegen/ExecutableWriter.h"
#include "codegen/driver/Compiler.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "runtime/engine/Generator.h"
#include "runtime/exec/Executable.h"
#include "runtime/exec/StepRunner.h"
#include "tests/unit/common/NumericCompare.h"
#include "tests/unit/common/TestPaths.h"

namespace kvjit {
namespace {

using ::kvjit::testing::AllClose;
using ::kvjit::testing::RelativeToLargest;

// 3x the worst measured (9e-5 of the largest logit): f16 rounding, not a
// wrong rope frequency or a missing q/k norm, which move logits by whole units.
constexpr double kLogitTolerance = 3e-4;

struct FamilyCase {
  const char* reference;  // under tests/data/llamacpp
  const char* family;
  bool tied;
  const char* tokenizer;  // under tests/data/hf_tokenizers
};

void PrintTo(const FamilyCase& c, std::ostream* out) { *out << c.reference; }

class LlamaCppFamiliesTest : public ::testing::TestWithParam<FamilyCase> {};

// Writes the case's model with make_random_gguf_model.py into a fresh file.
absl::StatusOr<std::string> WriteRandomGguf(const FamilyCase& c) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            absl::StrCat("kvjit-random-", c.family, c.tied ? "-tied-" : "-",
                                         ::getpid(), ".gguf"))
                               .string();
  const std::string command = absl::StrCat(
      "'", KVJIT_PYTHON, "' '", KVJIT_SOURCE_DIR, "/tools/scripts/make_random_gguf_model.py' --family ",
      c.family, c.tied ? " --tied" : "", " --tokenizer '", KVJIT_SOURCE_DIR, "/tests/data/hf_tokenizers/",
      c.tokenizer, "' '", path, "'");
  if (std::system(command.c_str()) != 0) {
    return absl::InternalError(absl::StrCat(
        "`", command, "` failed: the gguf and numpy packages scripts/setup.sh installs are needed"));
  }
  return path;
}

TEST_P(LlamaCppFamiliesTest, GreedyIdsEqualAndLogitsCloseToLlamaCpps) {
  const FamilyCase& c = GetParam();
  const std::string expected_path = testing::TestDataPath(absl::StrCat("llamacpp/", c.reference));
  ASSERT_FALSE(expected_path.empty()) << c.reference << " is missing";
  const nlohmann::json expected = nlohmann::json::parse(std::ifstream(expected_path));

  absl::StatusOr<std::string> model = WriteRandomGguf(c);
  ASSERT_TRUE(model.ok()) << model.status();
  const std::string kvx = *model + ".kvx";
  codegen::CompileOptions options;
  options.cache_dtype = "f16";  // llama.cpp's default, with which the reference was made
  options.max_tokens_per_step = 128;
  const absl::Status compiled = codegen::CompileModel(*model, kvx, options, nullptr);
  if (!compiled.ok()) std::filesystem::remove(*model);
  ASSERT_TRUE(compiled.ok()) << compiled;
  auto executable = runtime::Executable::Load(kvx);
  std::filesystem::remove(kvx);
  std::filesystem::remove(codegen::SidecarPathFor(kvx));
  ASSERT_TRUE(executable.ok()) << executable.status();
  auto runner = runtime::CpuStepRunner::Create(**executable, /*num_blocks=*/64, /*threads=*/2);
  ASSERT_TRUE(runner.ok()) << runner.status();

  size_t compared_tokens = 0;
  // Our logits of llama.cpp's top five tokens at each step, and llama.cpp's.
  std::vector<float> ours, llama_cpps;
  for (const nlohmann::json& prompt : expected["prompts"]) {
    const std::vector<int32_t> prompt_ids = prompt["prompt_ids"].get<std::vector<int32_t>>();
    const std::vector<int32_t> want = prompt["generated_ids"].get<std::vector<int32_t>>();
    runtime::Generator generator(**runner, 256);
    sampling::SamplingParams greedy;
    greedy.temperature = 0;
    size_t step = 0;
    bool same_so_far = true;
    auto got = generator.Generate(
        prompt_ids, greedy, static_cast<int64_t>(want.size()),
        [&](int32_t token) {
          same_so_far = same_so_far && token == want[step++];
          return true;
        },
        [&](absl::Span<const float> logits) {
          if (!same_so_far) return;  // only while both runs have seen the same tokens
          const nlohmann::json& top = prompt["steps"][step];
          for (size_t k = 0; k < top["top_ids"].size(); ++k) {
            ours.push_back(logits[top["top_ids"][k].get<int32_t>()]);
            llama_cpps.push_back(top["top_logits"][k].get<float>());
          }
        });
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(got->tokens, want) << prompt["name"];
    compared_tokens += want.size();
  }
  std::filesystem::remove(*model);  // the executable read its weights from it until here
  EXPECT_GE(compared_tokens, 32u);
  EXPECT_EQ(ours.size(), 5 * compared_tokens);
  EXPECT_TRUE(AllClose(ours, llama_cpps, RelativeToLargest(kLogitTolerance)));
}

INSTANTIATE_TEST_SUITE_P(
    RandomModels, LlamaCppFamiliesTest,
    ::testing::Values(
        FamilyCase{"random_llama3_greedy.json", "llama3", false, "llama3_style.tokenizer.json"},
        FamilyCase{"random_llama3_tied_greedy.json", "llama3", true, "llama3_style.tokenizer.json"},
        FamilyCase{"random_qwen3_greedy.json", "qwen3", false, "qwen25_style.tokenizer.json"}),
    [](const ::testing::TestParamInfo<FamilyCase>& info) {
      return absl::StrCat(info.param.family, info.param.tied ? "_tied" : "_untied");
    });

}  // namespace
}  // namespace kvjit
