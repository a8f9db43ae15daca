#ifndef KVJIT_CODEGEN_VERIFIER_VERIFIER_H_
#define KVJIT_CODEGEN_VERIFIER_VERIFIER_H_

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "codegen/equivalence/EquivalenceSchedule.h"
#include "codegen/equivalence/EquivalenceTolerance.h"
#include "frontend/model/ModelFile.h"
#include "frontend/model/ReferenceWeights.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"
#include "runtime/exec/Executable.h"

// --verify: a compiled program's logits against the reference evaluator's
// on the tfm IR as imported, on the model's own weights (dequantized), over
// the steps of MakeEquivalenceSchedule, within the tolerance of
// ToleranceFor (docs/numerics.md).
namespace kvjit::codegen {

// One subject's comparison, step by step.
struct EquivalenceReport {
  std::string subject;  // "the CPU step program", "the IR after fuse-attention"
  std::vector<StepCheck> steps;
  double seconds = 0;

  bool passed() const;
  // The first step's failure, naming its step and logit row; empty when
  // every step is within tolerance.
  std::string failure() const;
};

// "  step 1 (prefill of A (13 tokens)): 13 rows, max |diff| …" per step, then
// the verdict, each line ending in a newline.
std::string FormatReport(const EquivalenceReport& report, const LogitTolerance& tolerance);

// How --verify checked a CUDA executable's kernels.
struct CudaEquivalence {
  // Where they ran ("on the GPU: …", "under the host emulation: …"), or why
  // they did not.
  std::string how;
  std::vector<EquivalenceReport> reports;  // empty when they did not run
};

// The models whose CUDA kernels --verify runs under the host emulation where
// no GPU is: it runs each CUDA thread as a fiber, so its time grows with the
// parameters (stories260K: ~1.5 s compiling the kernels for the host, ~3.5 s
// running the steps twice), 5M parameters in about a minute.
inline constexpr int64_t kEmulateCudaMaxParameters = 5'000'000;

// The parameters of `model`: every weight's elements.
int64_t ParameterCount(const model::ModelFile& model);

class EquivalenceChecker {
 public:
  // Evaluates `imported` (the tfm IR as imported, before any pass) on the
  // schedule for KV blocks of `block_size` tokens. `model` must outlive the
  // verifier: its weights are read as they are needed.
  static absl::StatusOr<std::unique_ptr<EquivalenceChecker>> Create(mlir::ModuleOp imported,
                                                          const model::ModelFile& model,
                                                          int64_t block_size);

  const LogitTolerance& tolerance() const { return tolerance_; }
  // How long the reference evaluation of the imported IR took.
  double reference_seconds() const { return reference_seconds_; }

  // Adds to `pm` an instrumentation that evaluates the module after each of
  // its passes on the same steps (the whole-sequence function before
  // insert-kv-cache, the step function over a reference cache after it).
  // pass_reports() gets one report per pass, in order, up to and including
  // the first outside tolerance; the verifier must outlive `pm`'s run.
  void CheckAfterEachPass(mlir::PassManager& pm);
  const std::vector<EquivalenceReport>& pass_reports() const { return pass_reports_; }
  // An error where the reference evaluator could not evaluate a pass's IR.
  const absl::Status& pass_evaluation_status() const { return pass_evaluation_status_; }

  // Where `module`'s step function keeps its KV cache in a type that rounds
  // more than f16 (bf16, q8_0, q4_0, f8_e4m3): from here on the logits to
  // match are the reference evaluation of that step function over a cache
  // that rounds as its type does, not the imported IR's, whose distance from
  // them is the cache type's cost (kvjit perplexity measures it) rather than
  // a compiler error. Once only; a module with an f32 or f16 cache changes
  // nothing. The per-pass checks adopt the first such IR themselves.
  absl::Status AdoptCacheRounding(mlir::ModuleOp module);
  // What the logits are checked against, for reports.
  const std::string& reference_description() const { return reference_description_; }

  // Runs `executable`'s CPU step program on the steps with `threads` threads.
  absl::StatusOr<EquivalenceReport> CheckCpuProgram(const runtime::Executable& executable,
                                                     int threads) const;

  // Runs the CUDA kernels `executable` carries on the steps: on the GPU where
  // a driver and a GPU are there; else, for models of at most
  // kEmulateCudaMaxParameters, under the host emulation, twice: on the paths
  // a GPU would choose for each step, then on the prefill paths (f16 GEMM,
  // tiled attention) for every step, which short steps would not reach.
  // Neither: no reports, and `how` says why. Its tolerance is
  // cuda_tolerance().
  absl::StatusOr<CudaEquivalence> CheckCudaProgram(const runtime::Executable& executable) const;
  const LogitTolerance& cuda_tolerance() const { return cuda_tolerance_; }
  // Runs every rank's CPU program of the executable at `path`, split over
  // `ranks` tensor-parallel ranks, each in a thread with `threads` / `ranks`
  // threads of its own, their collectives within the process, and checks
  // rank 0's logits (TensorParallelEquivalence.cpp).
  absl::StatusOr<EquivalenceReport> CheckTensorParallelProgram(const std::string& path,
                                                               const runtime::LoadOptions& load,
                                                               int ranks, int threads) const;
  int64_t block_size() const { return block_size_; }

 private:
  EquivalenceChecker(const model::ModelFile& model, int64_t block_size)
      : config_(model.config),
        weights_(*model.weights),
        block_size_(block_size),
        parameters_(ParameterCount(model)) {}

  // Runs the steps on `runner`, compared within `tolerance`.
  absl::StatusOr<EquivalenceReport> CheckProgram(runtime::StepRunner& runner,
                                                  const std::string& subject,
                                                  const LogitTolerance& tolerance) const;

  // Evaluates the IR after pass `pass_name`, unless an earlier pass failed.
  void CheckPass(const std::string& pass_name, mlir::ModuleOp module);
  absl::StatusOr<EquivalenceReport> EvaluateModule(const std::string& subject,
                                                    mlir::ModuleOp module);

  model::ModelConfig config_;
  model::ReferenceWeights weights_;
  int64_t block_size_;
  int64_t parameters_;
  LogitTolerance tolerance_;
  LogitTolerance cuda_tolerance_;
  EquivalenceSchedule schedule_;
  // The imported IR's logits, [length, vocab] per sequence.
  std::vector<reference::RefTensor> expected_;
  // Each step's logits from the step function over a rounding cache, once
  // AdoptCacheRounding has made them the ones to match.
  std::vector<std::vector<float>> cache_rounded_steps_;
  std::string reference_description_ = "the imported IR";
  // The logits step s must match.
  std::vector<float> ExpectedRows(size_t s) const;
  double reference_seconds_ = 0;
  std::vector<EquivalenceReport> pass_reports_;
  absl::Status pass_evaluation_status_;
};

// Checks `executable`'s CPU step program with `threads` threads and, where
// it carries CUDA kernels, those (CheckCudaProgram); the reports go to
// `progress` (none where it is null). An error names the first step and logit row outside
// tolerance.
absl::Status CheckExecutable(const EquivalenceChecker& verifier, const runtime::Executable& executable,
                             int threads, std::FILE* progress);

// Loads the executable at `path` with `load` and checks it: as
// CheckExecutable does, or, for one split over tensor-parallel ranks, every
// rank's program together (CheckTensorParallelProgram).
absl::Status CheckExecutableFile(const EquivalenceChecker& verifier, const std::string& path,
                                 const runtime::LoadOptions& load, int threads,
                                 std::FILE* progress);

// kvjit verify FILE.kvx: re-imports the model the executable's weights come
// from and checks the executable (CheckExecutable).
absl::Status VerifyExecutableFile(const std::string& path, int threads, std::FILE* progress);

}  // namespace kvjit::codegen

#endif  // KVJIT_CODEGEN_VERIFIER_VERIFIER_H_
