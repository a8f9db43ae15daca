#ifndef KVJIT_TESTS_UNIT_E2E_LLAMACPPCOMPARISON_H_
#define KVJIT_TESTS_UNIT_E2E_LLAMACPPCOMPARISON_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "codegen/driver/Compiler.h"
#include "nlohmann/json.hpp"
#include "runtime/exec/Executable.h"
#include "runtime/exec/StepRunner.h"

namespace kvjit::testing {

// `model` compiled with `options` into a temporary .kvx, loaded, and the
// file and its sidecar removed (the loaded executable keeps them mapped).
absl::StatusOr<std::unique_ptr<runtime::Executable>> CompileAndLoad(
    const std::string& model, const codegen::CompileOptions& options);

// `model` compiled with a KV cache of `cache_dtype` and 128 tokens per step.
absl::StatusOr<std::unique_ptr<runtime::Executable>> CompileForComparison(const std::string& model,
                                                                          const std::string& cache_dtype);

// `model` compiled as llama.cpp's reference runs were made (f16 KV cache).
absl::StatusOr<std::unique_ptr<runtime::Executable>> CompileLikeTheLlamaCppReference(
    const std::string& model);

struct PromptComparison {
  std::string name;
  std::vector<int32_t> ours;
  std::vector<int32_t> llama_cpps;
};

// Greedy generation of each prompt of a llama.cpp reference file
// (tests/data/llamacpp/*.json, written by tools/scripts/llamacpp_reference.py;
// make_transformers_models.py writes transformers' runs in the same layout)
// next to the reference's: the ids of each prompt, and at every step while
// both runs have produced the same tokens our logits of the reference's top
// tokens beside its own.
struct LlamaCppComparison {
  std::vector<PromptComparison> prompts;
  std::vector<float> our_logits;
  std::vector<float> llama_cpp_logits;
  size_t generated_tokens = 0;
};

absl::StatusOr<LlamaCppComparison> CompareWithLlamaCpp(runtime::StepRunner& runner,
                                                       const nlohmann::json& reference,
                                                       int64_t context_length);

}  // namespace kvjit::testing

#endif  // KVJIT_TESTS_UNIT_E2E_LLAMACPPCOMPARISON_H_
