#include "codegen/equivalence/EquivalenceChecker.h"

#include <chrono>
#include <filesystem>
#include <functional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "frontend/model/DecoderBuilder.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassInstrumentation.h"
#include "passes/Pipeline.h"
#include "ir/Kv/KvTypes.h"
#include "codegen/cuda/emulation/EmulatedStepRunner.h"
#include "codegen/cuda/emulation/HostKernels.h"
#include "runtime/core/BuildConfig.h"
#include "runtime/core/StatusMacros.h"
#include "runtime/cpu/CpuStepRunner.h"
#include "runtime/cuda/CudaModuleVerifier.h"
#if KVJIT_HAVE_CUDA
#include "runtime/generation/RunnerFactory.h"
#endif

namespace kvjit::codegen {
namespace {

// The name insert-kv-cache gives the function it makes.
constexpr char kStepFunctionName[] = "step";

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Calls `check` with each pass that ran on the module and the module after
// it; a pass on nested ops is seen through the adaptor that ran it.
class AfterEachPass : public mlir::PassInstrumentation {
 public:
  explicit AfterEachPass(std::function<void(const std::string&, mlir::ModuleOp)> check)
      : check_(std::move(check)) {}

  void runAfterPass(mlir::Pass* pass, mlir::Operation* op) override {
    auto module = mlir::dyn_cast<mlir::ModuleOp>(op);
    if (!module) return;
    check_(pass->getArgument().empty() ? pass->getName().str() : pass->getArgument().str(),
           module);
  }

 private:
  std::function<void(const std::string&, mlir::ModuleOp)> check_;
};

// The model an executable was compiled from: the GGUF its weights live in,
// or the Hugging Face directory of its safetensors shards.
std::string ModelPathOf(const runtime::Executable& executable) {
  const std::string weights = executable.root().weight_files()->Get(0)->path()->str();
  if (absl::EndsWith(weights, ".gguf")) return weights;
  return std::filesystem::path(weights).parent_path().string();
}

}  // namespace

int64_t ParameterCount(const model::ModelFile& model) {
  int64_t parameters = 0;
  for (const model::WeightInfo& weight : model.weights->weights()) {
    parameters += weight.element_count();
  }
  return parameters;
}

bool EquivalenceReport::passed() const { return failure().empty(); }

std::string EquivalenceReport::failure() const {
  for (const StepCheck& step : steps) {
    if (!step.failure.empty()) return absl::StrCat(subject, ": ", step.failure);
  }
  return "";
}

std::string FormatReport(const EquivalenceReport& report, const LogitTolerance& tolerance) {
  std::string text;
  for (const StepCheck& step : report.steps) {
    absl::StrAppendFormat(&text,
                          "  %s: %d rows, max |diff| %.3g (%.3g of the logit range), rms %.3g of "
                          "the logits' deviation, argmax equal in %d/%d rows: %s\n",
                          step.step, step.rows, step.max_abs_difference,
                          step.max_fraction_of_range, step.max_rms_fraction,
                          step.rows_with_equal_argmax, step.rows,
                          step.failure.empty() ? "ok" : "FAIL");
  }
  absl::StrAppendFormat(&text, "  %s: %s (allowed: %.3g of the logit range, for %s; %.2f s)\n",
                        report.subject, report.passed() ? "PASS" : "FAIL",
                        tolerance.fraction_of_range, tolerance.weights, report.seconds);
  return text;
}

absl::StatusOr<std::unique_ptr<EquivalenceChecker>> EquivalenceChecker::Create(mlir::ModuleOp imported,
                                                           const model::ModelFile& model,
                                                           int64_t block_size) {
  const Clock::time_point start = Clock::now();
  std::unique_ptr<EquivalenceChecker> verifier(new EquivalenceChecker(model, block_size));
  verifier->tolerance_ = ToleranceFor(imported);
  verifier->cuda_tolerance_ = CudaToleranceFor(imported);
  verifier->schedule_ = MakeEquivalenceSchedule(model.config.vocab_size, block_size);
  reference::ReferenceEvaluator evaluator(imported, verifier->weights_);
  KVJIT_ASSIGN_OR_RETURN(
      verifier->expected_,
      EvaluateSequences(evaluator, model::kForwardFunctionName, verifier->schedule_));
  verifier->reference_seconds_ = SecondsSince(start);
  return verifier;
}

void EquivalenceChecker::CheckAfterEachPass(mlir::PassManager& pm) {
  pm.addInstrumentation(std::make_unique<AfterEachPass>(
      [this](const std::string& pass, mlir::ModuleOp module) { CheckPass(pass, module); }));
}

std::vector<float> EquivalenceChecker::ExpectedRows(size_t s) const {
  if (!cache_rounded_steps_.empty()) return cache_rounded_steps_[s];
  return RowsOfStep(expected_, schedule_.steps[s]);
}

namespace {

// Whether a cache of `element` rounds more than f16 does.
bool RoundsMoreThanHalf(kv::CacheElement element) {
  return element != kv::CacheElement::f32 && element != kv::CacheElement::f16;
}

}  // namespace

absl::Status EquivalenceChecker::AdoptCacheRounding(mlir::ModuleOp module) {
  kv::CacheType cache = StepCache(module);
  if (!cache_rounded_steps_.empty() || !cache ||
      (!RoundsMoreThanHalf(cache.getKeyType()) && !RoundsMoreThanHalf(cache.getValueType()))) {
    return absl::OkStatus();
  }
  reference::ReferenceEvaluator evaluator(module, weights_);
  reference::RefKvCache rounding(cache.getLayers(), config_.num_kv_heads, config_.head_dim, block_size_,
                                 schedule_.num_blocks, cache.getKeyType(), cache.getValueType(),
                                 cache.getKeyRotation(), cache.getValueRotation());
  evaluator.set_cache(&rounding);
  std::vector<std::vector<float>> steps;
  for (const ScheduledStep& step : schedule_.steps) {
    KVJIT_ASSIGN_OR_RETURN(reference::RefTensor logits, EvaluateStep(evaluator, kStepFunctionName, step));
    steps.push_back(std::move(logits.values));
  }
  cache_rounded_steps_ = std::move(steps);
  tolerance_ = WithCacheRounding(tolerance_, cache.getKeyType(), cache.getValueType());
  cuda_tolerance_ = WithCacheRounding(cuda_tolerance_, cache.getKeyType(), cache.getValueType());
  auto rotated = [](int64_t rotation) {
    return rotation > 0 ? absl::StrCat(" rotated in blocks of ", rotation) : std::string();
  };
  reference_description_ = absl::StrCat(
      "the step IR over a reference cache of ", kv::stringifyCacheElement(cache.getKeyType()).str(), " keys",
      rotated(cache.getKeyRotation()), " and ", kv::stringifyCacheElement(cache.getValueType()).str(), " values",
      rotated(cache.getValueRotation()));
  return absl::OkStatus();
}

void EquivalenceChecker::CheckPass(const std::string& pass_name, mlir::ModuleOp module) {
  if (!pass_evaluation_status_.ok()) return;
  if (!pass_reports_.empty() && !pass_reports_.back().passed()) return;
  if (absl::Status adopted = AdoptCacheRounding(module); !adopted.ok()) {
    pass_evaluation_status_ = absl::Status(
        adopted.code(), absl::StrCat("the reference evaluator cannot evaluate the IR after ", pass_name,
                                     " over its cache's rounding: ", adopted.message()));
    return;
  }
  absl::StatusOr<EquivalenceReport> report =
      EvaluateModule(absl::StrCat("the IR after ", pass_name), module);
  if (!report.ok()) {
    pass_evaluation_status_ = absl::Status(
        report.status().code(),
        absl::StrCat("the reference evaluator cannot evaluate the IR after ", pass_name, ": ",
                     report.status().message()));
    return;
  }
  pass_reports_.push_back(*std::move(report));
}

absl::StatusOr<EquivalenceReport> EquivalenceChecker::EvaluateModule(const std::string& subject,
                                                            mlir::ModuleOp module) {
  const Clock::time_point start = Clock::now();
  EquivalenceReport report;
  report.subject = subject;
  reference::ReferenceEvaluator evaluator(module, weights_);
  const std::vector<ScheduledStep>& steps = schedule_.steps;
  if (kv::CacheType step_cache = StepCache(module)) {
    reference::RefKvCache cache(step_cache.getLayers(), config_.num_kv_heads, config_.head_dim,
                                block_size_, schedule_.num_blocks, step_cache.getKeyType(),
                                step_cache.getValueType(), step_cache.getKeyRotation(),
                                step_cache.getValueRotation());
    evaluator.set_cache(&cache);
    for (size_t s = 0; s < steps.size(); ++s) {
      KVJIT_ASSIGN_OR_RETURN(reference::RefTensor logits,
                             EvaluateStep(evaluator, kStepFunctionName, steps[s]));
      report.steps.push_back(CompareStep(steps[s], static_cast<int>(s + 1), logits.values,
                                         ExpectedRows(s), tolerance_));
    }
  } else {
    // Before insert-kv-cache: the whole-sequence function, each step's rows
    // taken from its evaluation of every sequence.
    KVJIT_ASSIGN_OR_RETURN(std::vector<reference::RefTensor> logits,
                           EvaluateSequences(evaluator, model::kForwardFunctionName, schedule_));
    for (size_t s = 0; s < steps.size(); ++s) {
      report.steps.push_back(CompareStep(steps[s], static_cast<int>(s + 1),
                                         RowsOfStep(logits, steps[s]), ExpectedRows(s), tolerance_));
    }
  }
  report.seconds = SecondsSince(start);
  return report;
}

absl::StatusOr<EquivalenceReport> EquivalenceChecker::CheckProgram(runtime::StepRunner& runner,
                                                          const std::string& subject,
                                                          const LogitTolerance& tolerance) const {
  const Clock::time_point start = Clock::now();
  EquivalenceReport report;
  report.subject = cache_rounded_steps_.empty() ? subject
                                                : absl::StrCat(subject, " against ", reference_description_);
  const std::vector<ScheduledStep>& steps = schedule_.steps;
  for (size_t s = 0; s < steps.size(); ++s) {
    absl::StatusOr<absl::Span<const float>> logits = runner.Run(steps[s].inputs);
    if (!logits.ok()) {
      return absl::Status(logits.status().code(),
                          absl::StrCat("step ", s + 1, " (", steps[s].description, ") of ",
                                       subject, ": ", logits.status().message()));
    }
    report.steps.push_back(CompareStep(steps[s], static_cast<int>(s + 1), *logits, ExpectedRows(s), tolerance));
  }
  report.seconds = SecondsSince(start);
  return report;
}

absl::StatusOr<EquivalenceReport> EquivalenceChecker::CheckCpuProgram(const runtime::Executable& executable,
                                                             int threads) const {
  if (executable.kv_layout().block_size() != block_size_) {
    return absl::InvalidArgumentError(
        absl::StrFormat("the executable's KV blocks hold %d tokens; the verifier was made for %d",
                        executable.kv_layout().block_size(), block_size_));
  }
  KVJIT_ASSIGN_OR_RETURN(std::unique_ptr<runtime::CpuStepRunner> runner,
                         runtime::CpuStepRunner::Create(executable, schedule_.num_blocks, threads));
  return CheckProgram(*runner, "the CPU step program", tolerance_);
}

absl::StatusOr<CudaEquivalence> EquivalenceChecker::CheckCudaProgram(
    const runtime::Executable& executable) const {
  CudaEquivalence verification;
  if (executable.cuda() == nullptr) {
    verification.how = "the executable carries no CUDA kernels";
    return verification;
  }
  KVJIT_RETURN_IF_ERROR(::kvjit::cuda::VerifyCudaModule(executable));
  std::string no_gpu = "this kvjit was built without the CUDA backend";
#if KVJIT_HAVE_CUDA
  absl::StatusOr<std::unique_ptr<runtime::StepRunner>> gpu =
      runtime::CreateStepRunner(executable, schedule_.num_blocks, /*threads=*/1, "cuda");
  if (gpu.ok()) {
    verification.how = "on the GPU";
    KVJIT_ASSIGN_OR_RETURN(EquivalenceReport report,
                           CheckProgram(**gpu, "the CUDA kernels on the GPU", cuda_tolerance_));
    verification.reports.push_back(std::move(report));
    return verification;
  }
  if (gpu.status().code() != absl::StatusCode::kFailedPrecondition) return gpu.status();
  no_gpu = std::string(gpu.status().message());
#endif
  if (parameters_ > kEmulateCudaMaxParameters) {
    verification.how = absl::StrFormat(
        "the CUDA kernels were not checked: no GPU (%s), and the host emulation runs models of at "
        "most %d parameters (this one has %d); run kvjit verify where a GPU is",
        no_gpu, kEmulateCudaMaxParameters, parameters_);
    return verification;
  }
  const Clock::time_point start = Clock::now();
  const cuda::CudaModuleSpec module = cuda::ModuleSpecOf(*executable.cuda());
  KVJIT_ASSIGN_OR_RETURN(std::unique_ptr<cuda::HostKernels> kernels,
                         cuda::HostKernels::Build(module.source));
  verification.how = absl::StrFormat(
      "under the host emulation (no GPU: %s); kernels compiled for the host in %.1f s by %s",
      no_gpu, SecondsSince(start), kernels->compiler());
  const std::pair<cuda::EmulatedPaths, const char*> runs[] = {
      {cuda::EmulatedPaths::kAsOnAGpu, "the CUDA kernels (emulated), paths as on a GPU"},
      {cuda::EmulatedPaths::kPrefillOnly, "the CUDA kernels (emulated), prefill paths"}};
  for (const auto& [paths, subject] : runs) {
    KVJIT_ASSIGN_OR_RETURN(std::unique_ptr<cuda::EmulatedStepRunner> runner,
                           cuda::EmulatedStepRunner::Create(executable, module, *kernels,
                                                            schedule_.num_blocks, paths));
    KVJIT_ASSIGN_OR_RETURN(EquivalenceReport report,
                           CheckProgram(*runner, subject, cuda_tolerance_));
    verification.reports.push_back(std::move(report));
  }
  return verification;
}

absl::Status CheckExecutable(const EquivalenceChecker& verifier, const runtime::Executable& executable,
                             int threads, std::FILE* progress) {
  auto report = [progress](const std::string& text) {
    if (progress != nullptr) std::fputs(text.c_str(), progress);
  };
  KVJIT_ASSIGN_OR_RETURN(EquivalenceReport cpu, verifier.CheckCpuProgram(executable, threads));
  report(FormatReport(cpu, verifier.tolerance()));
  if (!cpu.passed()) return absl::InternalError(cpu.failure());
  if (executable.cuda() == nullptr) return absl::OkStatus();
  KVJIT_ASSIGN_OR_RETURN(CudaEquivalence cuda, verifier.CheckCudaProgram(executable));
  report(absl::StrCat("  the CUDA kernels: ", cuda.how, "\n"));
  for (const EquivalenceReport& kernels : cuda.reports) {
    report(FormatReport(kernels, verifier.cuda_tolerance()));
    if (!kernels.passed()) return absl::InternalError(kernels.failure());
  }
  return absl::OkStatus();
}

absl::Status VerifyExecutableFile(const std::string& path, int threads, std::FILE* progress) {
  KVJIT_ASSIGN_OR_RETURN(std::unique_ptr<runtime::Executable> executable,
                         runtime::Executable::Load(path));
  const std::string model_path = ModelPathOf(*executable);
  KVJIT_ASSIGN_OR_RETURN(model::ModelFile model, model::OpenModelFile(model_path));
  mlir::MLIRContext context;
  KVJIT_ASSIGN_OR_RETURN(mlir::OwningOpRef<mlir::ModuleOp> imported,
                         model::BuildDecoderModule(context, model.config, *model.weights));
  // A self-draft (compiled with keep_layers) is checked against the model cut as it was.
  const int64_t layers = executable->config().num_layers();
  std::string cut;
  if (layers < model.config.num_layers) {
    std::string errors;
    llvm::raw_string_ostream stream(errors);
    if (mlir::failed(RunKeepFirstLayers(*imported, layers, stream))) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": ", errors));
    }
    cut = absl::StrCat(" cut to its first ", layers, " layers");
  }
  std::fprintf(progress, "verifying %s against the reference evaluator on %s%s…\n", path.c_str(),
               model_path.c_str(), cut.c_str());
  KVJIT_ASSIGN_OR_RETURN(std::unique_ptr<EquivalenceChecker> verifier,
                         EquivalenceChecker::Create(*imported, model, executable->kv_layout().block_size()));
  std::fprintf(progress, "  reference logits of the imported IR (%.2f s)\n",
               verifier->reference_seconds());
  return CheckExecutableFile(*verifier, path, {}, threads, progress);
}

}  // namespace kvjit::codegen
