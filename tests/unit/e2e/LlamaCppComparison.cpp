#include "tests/unit/e2e/LlamaCppComparison.h"

#include <unistd.h>

#include <filesystem>
#include <utility>

#include "absl/strings/str_cat.h"
#include "codegen/ExecutableWriter.h"
#include "codegen/driver/Compiler.h"
#include "runtime/core/StatusMacros.h"
#include "runtime/generation/Generator.h"

namespace kvjit::testing {

absl::StatusOr<std::unique_ptr<runtime::Executable>> CompileAndLoad(
    const std::string& model, const codegen::CompileOptions& options) {
  const std::string kvx =
      (std::filesystem::temp_directory_path() /
       absl::StrCat(std::filesystem::path(model).filename().string(), "-", ::getpid(), ".kvx"))
          .string();
  KVJIT_RETURN_IF_ERROR(codegen::CompileModel(model, kvx, options, nullptr));
  auto executable = runtime::Executable::Load(kvx);
  std::filesystem::remove(kvx);
  std::filesystem::remove(codegen::SidecarPathFor(kvx));
  return executable;
}

absl::StatusOr<std::unique_ptr<runtime::Executable>> CompileForComparison(const std::string& model,
                                                                          const std::string& cache_dtype) {
  codegen::CompileOptions options;
  options.cache_dtype = cache_dtype;
  options.max_tokens_per_step = 128;
  return CompileAndLoad(model, options);
}

absl::StatusOr<std::unique_ptr<runtime::Executable>> CompileLikeTheLlamaCppReference(
    const std::string& model) {
  return CompileForComparison(model, "f16");  // llama.cpp's default, with which the references were made
}

absl::StatusOr<LlamaCppComparison> CompareWithLlamaCpp(runtime::StepRunner& runner,
                                                       const nlohmann::json& reference,
                                                       int64_t context_length) {
  LlamaCppComparison comparison;
  for (const nlohmann::json& prompt : reference["prompts"]) {
    PromptComparison result;
    result.name = prompt["name"].get<std::string>();
    result.llama_cpps = prompt["generated_ids"].get<std::vector<int32_t>>();
    const std::vector<int32_t> prompt_ids = prompt["prompt_ids"].get<std::vector<int32_t>>();
    runtime::Generator generator(runner, context_length);
    sampling::SamplingParams greedy;
    greedy.temperature = 0;
    size_t step = 0;
    bool same_so_far = true;
    absl::StatusOr<runtime::GenerationResult> generated = generator.Generate(
            prompt_ids, greedy, static_cast<int64_t>(result.llama_cpps.size()),
            [&](int32_t token) {
              same_so_far = same_so_far && token == result.llama_cpps[step++];
              return true;
            },
            [&](absl::Span<const float> logits) {
              if (!same_so_far) return;
              const nlohmann::json& top = prompt["steps"][step];
              for (size_t k = 0; k < top["top_ids"].size(); ++k) {
                comparison.our_logits.push_back(logits[top["top_ids"][k].get<int32_t>()]);
                comparison.llama_cpp_logits.push_back(top["top_logits"][k].get<float>());
              }
            });
    if (!generated.ok()) return generated.status();
    result.ours = std::move(generated->tokens);
    comparison.generated_tokens += result.llama_cpps.size();
    comparison.prompts.push_back(std::move(result));
  }
  return comparison;
}

}  // namespace kvjit::testing
