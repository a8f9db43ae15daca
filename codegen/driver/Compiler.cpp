#include "codegen/driver/Compiler.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdarg>
#include <filesystem>
#include <fstream>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "codegen/ExecutableWriter.h"
#include "codegen/driver/IrFile.h"
#include "codegen/equivalence/EquivalenceChecker.h"
#include "codegen/weights/SourceWeights.h"
#include "codegen/weights/WeightMaterializer.h"
#include "frontend/model/DecoderBuilder.h"
#include "frontend/model/ModelFile.h"
#include "frontend/model/ParamBinding.h"
#include "ir/Dist/DistOps.h"
#include "ir/Kv/KvTypes.h"
#include "ir/Tfm/TfmOps.h"
#include "ir/Tfm/TfmStorage.h"
#include "llvm/ADT/DenseSet.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"
#include "passes/MemoryPlanChecker.h"
#include "passes/Pipeline.h"
#include "runtime/core/BuildConfig.h"
#include "runtime/core/StatusMacros.h"
#include "runtime/cpu/CpuIsa.h"
#include "runtime/exec/Executable.h"
#include "runtime/quant/StorageType.h"
#include "runtime/schema/KvCacheFormat.h"
#include "passes/registration/KvjitRegistration.h"

#if KVJIT_HAVE_CUDA
#include "codegen/cuda/CudaCodegen.h"
#include "codegen/cuda/NvrtcCompiler.h"
#endif

namespace kvjit::codegen {
namespace {

void Progress(std::FILE* stream, const char* format, ...) {
  if (stream == nullptr) return;
  va_list arguments;
  va_start(arguments, format);
  std::vfprintf(stream, format, arguments);
  va_end(arguments);
}

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::string MiB(uint64_t bytes) { return absl::StrFormat("%.2f MiB", bytes / 1048576.0); }

// Pass failures arrive as diagnostics; they become the command's error.
class DiagnosticCollector {
 public:
  explicit DiagnosticCollector(mlir::MLIRContext& context)
      : handler_(&context, [this](mlir::Diagnostic& diagnostic) {
          if (diagnostic.getSeverity() != mlir::DiagnosticSeverity::Error) return mlir::failure();
          std::string location;
          llvm::raw_string_ostream stream(location);
          stream << diagnostic.getLocation();
          absl::StrAppend(&errors_, errors_.empty() ? "" : "\n", location, ": ", diagnostic.str());
          return mlir::success();
        }) {}

  const std::string& errors() const { return errors_; }

 private:
  std::string errors_;
  mlir::ScopedDiagnosticHandler handler_;
};

// What plan-memory decided, from the attributes it leaves on the step function.
std::string DescribePlan(mlir::ModuleOp module) {
  for (auto step : module.getOps<mlir::func::FuncOp>()) {
    kernel::ArenaAttr arena = ArenaOf(step);
    kv::LayoutAttr layout = KvLayoutOf(step);
    if (!arena || !layout) continue;
    return absl::StrFormat("@%s: arena %s for %d tokens per step; KV %d bytes per block, %d blocks",
                           step.getSymName().str(), MiB(arena.getBytes()), arena.getMaxTokens(),
                           layout.getBlockBytes(), layout.getBlocks());
  }
  return "no planned step function";
}

// How many of the module's weights have each layout, and the bytes of those
// the writer repacks into the sidecar: "weight layouts: 90 rows_interleaved8
// (52.3 MiB, repacked into the sidecar), 3 gguf".
std::string DescribeWeightLayouts(mlir::ModuleOp module) {
  int64_t gguf = 0, interleaved = 0;
  uint64_t interleaved_bytes = 0;
  for (tfm::ParamOp param : module.getOps<tfm::ParamOp>()) {
    if (param.getLayout() != tfm::WeightLayout::rows_interleaved8) {
      ++gguf;
      continue;
    }
    ++interleaved;
    auto type = mlir::cast<mlir::RankedTensorType>(param.getType());
    const absl::StatusOr<uint64_t> row_bytes =
        quant::RowBytes(tfm::ToQuantStorage(param.getStorage()), type.getDimSize(1));
    if (row_bytes.ok()) interleaved_bytes += *row_bytes * static_cast<uint64_t>(type.getDimSize(0));
  }
  if (interleaved == 0) return absl::StrFormat("weight layouts: %d gguf", gguf);
  return absl::StrFormat("weight layouts: %d rows_interleaved8 (%s, repacked into the sidecar), %d gguf",
                         interleaved, MiB(interleaved_bytes), gguf);
}

// The passes of `pm`, as a textual pipeline names them with their options.
std::string DescribePasses(mlir::PassManager& pm) {
  std::string text;
  llvm::raw_string_ostream stream(text);
  for (mlir::Pass& pass : pm.getPasses()) {
    if (!text.empty()) stream << ",";
    pass.printAsTextualPipeline(stream);
  }
  return text.empty() ? "none" : text;
}

// The verifier, with the imported IR's reference logits, where the options
// (or the model's size) ask for verification; null where they do not.
absl::StatusOr<std::unique_ptr<EquivalenceChecker>> StartVerification(mlir::ModuleOp imported,
                                                            const std::string& description,
                                                            const model::ModelFile& model,
                                                            const CompileOptions& options,
                                                            std::FILE* progress) {
  const int64_t parameters = ParameterCount(model);
  const bool by_size = parameters <= kVerifyByDefaultMaxParameters;
  if (!options.verify_each_pass && (options.verification == Verification::kOff ||
                                    (options.verification == Verification::kBySize && !by_size))) {
    if (options.verification == Verification::kBySize) {
      Progress(progress,
               "not verifying: %lld parameters, above the %lld that --verify is on by default "
               "for\n",
               static_cast<long long>(parameters),
               static_cast<long long>(kVerifyByDefaultMaxParameters));
    }
    return nullptr;
  }
  Progress(progress, "verifying against the reference evaluator on %s…\n", description.c_str());
  KVJIT_ASSIGN_OR_RETURN(std::unique_ptr<EquivalenceChecker> verifier,
                         EquivalenceChecker::Create(imported, model, options.block_size));
  Progress(progress, "  reference logits of %s (%.2f s)\n", description.c_str(),
           verifier->reference_seconds());
  return verifier;
}

// The reports of --verify_each_pass; an error names the first pass outside
// tolerance.
absl::Status ReportEachPass(const EquivalenceChecker& verifier, const std::string& model_path,
                            std::FILE* progress) {
  KVJIT_RETURN_IF_ERROR(verifier.pass_evaluation_status());
  for (const EquivalenceReport& report : verifier.pass_reports()) {
    Progress(progress, "%s", FormatReport(report, verifier.tolerance()).c_str());
    if (!report.passed()) {
      return absl::InternalError(absl::StrCat(model_path, ": ", report.failure()));
    }
  }
  return absl::OkStatus();
}

// The suffix of the files a compile stages beside its outputs until they
// pass --verify: unique to this compile, since two compiles of one model
// into one cache path, as two `kvjit run`s started together make, must not
// move each other's files.
std::string UnverifiedSuffix() {
  std::random_device random;
  return absl::StrCat(".unverified.", getpid(), ".", random());
}

// Moves the staged file `staged` to `path`.
absl::Status MoveVerified(const std::string& staged, const std::string& path) {
  std::error_code error;
  std::filesystem::rename(staged, path, error);
  if (error) {
    return absl::PermissionDeniedError(
        absl::StrCat(path, ": cannot move the verified file there: ", error.message()));
  }
  return absl::OkStatus();
}

// The sidecar at `path`, staged at `path` + `unverified_suffix` until the
// executable passes --verify; written in place without a suffix (no
// verification).
SidecarTarget StagedSidecar(const std::string& path, const std::string& unverified_suffix) {
  return SidecarTarget(path, unverified_suffix.empty() ? "" : absl::StrCat(path, unverified_suffix));
}

// Writes `executable` to `output_path`; with a `verifier`, only once its CPU
// step program is within tolerance of the reference: it is checked in a
// file beside it, staged with its sidecars (each `sidecar.staged_at`, where
// the writer put it), and all are removed when it fails, so that a failed
// compile changes neither the executable nor the sidecars already at those
// paths. The sidecars move into place first: the new executable never names
// a sidecar that is not there yet. A tensor-parallel executable has a
// sidecar per rank, all staged alike.
absl::Status WriteCheckedExecutable(const flatbuffers::DetachedBuffer& executable,
                                    const std::string& output_path,
                                    absl::Span<const SidecarTarget> sidecars,
                                    const std::string& unverified_suffix,
                                    const EquivalenceChecker* verifier,
                                    const CompileOptions& options, std::FILE* progress) {
  if (verifier == nullptr) return WriteExecutableFile(executable, output_path);
  const std::string unverified = absl::StrCat(output_path, unverified_suffix);
  KVJIT_RETURN_IF_ERROR(WriteExecutableFile(executable, unverified));
  const absl::Status verified = [&]() -> absl::Status {
    runtime::LoadOptions load;
    for (const SidecarTarget& sidecar : sidecars) {
      load.staged_weight_files[WeightFilePathAsNamed(sidecar.path)] = sidecar.staged_at;
    }
    return CheckExecutableFile(*verifier, unverified, load, options.verify_threads, progress);
  }();
  if (!verified.ok()) {
    std::error_code ignored;
    std::filesystem::remove(unverified, ignored);
    for (const SidecarTarget& sidecar : sidecars) std::filesystem::remove(sidecar.staged_at, ignored);
    return absl::Status(verified.code(),
                        absl::StrCat(verified.message(), "; ", output_path, " was not written"));
  }
  // A program without weights of the compiler's making has no sidecar.
  for (const SidecarTarget& sidecar : sidecars) {
    std::error_code no_sidecar;
    if (std::filesystem::exists(sidecar.staged_at, no_sidecar)) {
      KVJIT_RETURN_IF_ERROR(MoveVerified(sidecar.staged_at, sidecar.path));
    }
  }
  return MoveVerified(unverified, output_path);
}

#if KVJIT_HAVE_CUDA
// The CUDA kernels of the program in `cpu_executable` (the executable for
// the CPU alone), compiled by NVRTC, then the executable again with them
// (and, for rank 0 of a tensor-parallel split, the other ranks').
absl::StatusOr<flatbuffers::DetachedBuffer> AddCudaModule(
    const flatbuffers::DetachedBuffer& cpu_executable, mlir::ModuleOp module,
    const model::ModelFile& model, const tokenizer::Vocabulary& vocabulary,
    const std::string& chat_template, const SidecarTarget& sidecar,
    const CompileOptions& options, std::FILE* progress, const OtherRanks& other_ranks = {}) {
  Clock::time_point start = Clock::now();
  Progress(progress, "generating CUDA kernels…\n");
  KVJIT_ASSIGN_OR_RETURN(cuda::CudaModuleSpec kernels,
                         cuda::GenerateCudaModule(*kvx::GetExecutable(cpu_executable.data())));
  Progress(progress, "  %zu kernels for %zu instructions, %zu bytes of CUDA C++ (%.2f s)\n",
           kernels.kernel_names.size(), kernels.instructions.size(), kernels.source.size(),
           SecondsSince(start));
  if (!options.cuda_source_path.empty()) {
    std::ofstream source(options.cuda_source_path, std::ios::binary | std::ios::trunc);
    source << kernels.source;
    if (!source.flush()) {
      return absl::PermissionDeniedError(
          absl::StrCat(options.cuda_source_path, ": cannot write the CUDA source"));
    }
    Progress(progress, "  source in %s\n", options.cuda_source_path.c_str());
  }

  start = Clock::now();
  cuda::NvrtcOptions nvrtc;
  nvrtc.arch = static_cast<uint32_t>(options.cuda_arch);
  nvrtc.fast_math = options.cuda_fast_math;
  const cuda::NvrtcCache cache(cuda::NvrtcCache::DefaultDirectory());
  Progress(progress, "compiling them with NVRTC for sm_%lld…\n",
           static_cast<long long>(options.cuda_arch));
  KVJIT_ASSIGN_OR_RETURN(cuda::NvrtcResult compiled,
                         cuda::CompileWithNvrtc(kernels.source, model.path, nvrtc, &cache));
  const std::string origin =
      compiled.cache_hit ? absl::StrCat("from the cache in ", cache.directory()) : "compiled";
  Progress(progress, "  cubin %s, PTX %s (%s, %.2f s)\n", MiB(compiled.binary.cubin.size()).c_str(),
           MiB(compiled.binary.ptx.size()).c_str(), origin.c_str(), SecondsSince(start));
  const CudaSection section{kernels, compiled.binary};
  return WriteExecutable(module, model, vocabulary, chat_template, sidecar, &section, other_ranks);
}
#endif

absl::Status CheckOptions(const CompileOptions& options) {
  if (options.target != "cpu" && options.target != "cuda") {
    return absl::InvalidArgumentError(
        absl::StrCat("--target must be cpu or cuda, got '", options.target, "'"));
  }
  const bool for_cuda = options.target == "cuda";
  if (for_cuda && !KVJIT_HAVE_CUDA) {
    return absl::FailedPreconditionError(
        "--target cuda: this kvjit was built without the CUDA toolkit (NVRTC was not found at "
        "configure time); install CUDA and reconfigure, or compile for --target cpu");
  }
  if (options.tensor_parallel < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--tp must be 1 (one process) or the number of processes to split the model over, got ",
        options.tensor_parallel));
  }
  if (options.tensor_parallel > 1) {
    const char* conflict = options.keep_layers > 0     ? "--keep_layers"
                           : options.verify_each_pass  ? "--verify_each_pass (the reference "
                                                         "evaluator runs the ranks' programs only "
                                                         "together, as a whole)"
                           : !options.pipeline.empty() ? "--pipeline (--tp builds its own)"
                                                       : nullptr;
    if (conflict != nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("--tp ", options.tensor_parallel,
                                                     " cannot be combined with ", conflict));
    }
  }
  if (options.keep_layers < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--keep_layers must be 0 (every layer) or a number of layers to keep, got ",
        options.keep_layers));
  }
  if (options.cache_rotation != "auto" && options.cache_rotation != "none") {
    return absl::InvalidArgumentError(
        absl::StrCat("--cache_rotation must be auto or none, got '", options.cache_rotation, "'"));
  }
  for (const auto& [flag, name] : {std::pair{"--cache_dtype", options.cache_dtype},
                                   std::pair{"--cache_dtype_k", options.cache_dtype_k},
                                   std::pair{"--cache_dtype_v", options.cache_dtype_v}}) {
    if (name.empty() && flag != std::string_view("--cache_dtype")) continue;
    const kvx::KvCacheFormat* format = kvx::FindKvCacheFormat(std::string_view(name));
    if (format == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(flag, " must be one of ",
                                                     kvx::kKvCacheFormatNames, ", got '", name, "'"));
    }
    // Every type of kKvCacheFormats runs on both backends: the CUDA kernels
    // store and load each as the CPU does (codegen/cuda/device/KvCache.cuh),
    // rotated or not; a layout they cannot keep is refused by name when the
    // kernels are generated (codegen/cuda/KernelEmitter.h, KvCacheTypesOf).
  }
  return absl::OkStatus();
}

// The passes for `module` into `pm`: the hook of the options, or their
// textual pipeline less the passes the module is past. Returns the block
// size of the KV cache the passes give the program, and the layers to keep.
absl::StatusOr<PipelineForModule> BuildPipeline(mlir::ModuleOp module, const std::string& source,
                                                const CompileOptions& options,
                                                mlir::PassManager& pm, std::FILE* progress,
                                                int64_t rank = 0) {
  if (options.build_pipeline) {
    options.build_pipeline(pm);
    PipelineForModule hooked;
    hooked.kv_block_size = options.block_size;
    if (options.keep_layers > 0) hooked.keep_layers = options.keep_layers;
    return hooked;
  }
  KvjitPipelineOptions defaults;
  defaults.keepLayers = options.keep_layers;
  defaults.blockSize = options.block_size;
  defaults.cacheElementType = options.cache_dtype;
  defaults.keyElementType = options.cache_dtype_k;
  defaults.valueElementType = options.cache_dtype_v;
  defaults.cacheRotation = options.cache_rotation;
  defaults.maxTokensPerStep = options.max_tokens_per_step;
  defaults.kvMemoryMib = options.kv_memory_mib;
  defaults.tensorParallelRanks = options.tensor_parallel;
  defaults.tensorParallelRank = rank;
  // The CUDA kernels read GGUF's rows.
  if (options.target == "cuda") {
    defaults.weightLayoutIsa = "none";
  } else if (options.weight_layout_isa == "host") {
    defaults.weightLayoutIsa = std::string(cpu::CpuIsaName(cpu::BestCpuIsa()));
  } else {
    defaults.weightLayoutIsa = options.weight_layout_isa;
  }
  defaults.weightLayoutCpu = options.weight_layout_cpu == "host" ? std::string(cpu::CpuModelName(cpu::HostCpuModel()))
                                                                  : options.weight_layout_cpu;
  const std::string text = options.pipeline.empty() ? KvjitPipelineText(defaults) : options.pipeline;
  std::string errors;
  llvm::raw_string_ostream error_stream(errors);
  mlir::FailureOr<PipelineForModule> parsed = ParsePipelineFor(module, text, pm, error_stream);
  if (mlir::failed(parsed)) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": --pipeline: ", errors));
  }
  for (const std::string& pass : parsed->skipped) {
    Progress(progress, "  not running %s: %s is past it\n", pass.c_str(), source.c_str());
  }
  return *std::move(parsed);
}

// keep-first-layers on `module` and, where it is another module, on
// --verify's `reference`, so that both compute the same cut model.
absl::Status KeepFirstLayers(mlir::MLIRContext& context, mlir::ModuleOp module,
                             mlir::ModuleOp reference, int64_t layers, const std::string& source,
                             std::FILE* progress) {
  const Clock::time_point start = Clock::now();
  std::string errors;
  llvm::raw_string_ostream stream(errors);
  if (mlir::failed(RunKeepFirstLayers(module, layers, stream)) ||
      (reference != module && mlir::failed(RunKeepFirstLayers(reference, layers, stream)))) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": ", errors));
  }
  Progress(progress, "  kept the first %lld layers (%.2f s)\n", static_cast<long long>(layers),
           SecondsSince(start));
  return absl::OkStatus();
}

// Runs `pm` on `module` and reports the plan it made.
absl::Status RunPasses(mlir::MLIRContext& context, mlir::PassManager& pm, mlir::ModuleOp module,
                       const std::string& source, const CompileOptions& options,
                       std::FILE* progress) {
  const Clock::time_point start = Clock::now();
  Progress(progress, "running passes: %s…\n", DescribePasses(pm).c_str());
  if (options.dump_ir_after_all) {
    pm.enableIRPrinting(
        /*shouldPrintBeforePass=*/[](mlir::Pass*, mlir::Operation*) { return false; },
        /*shouldPrintAfterPass=*/[](mlir::Pass*, mlir::Operation*) { return true; },
        /*printModuleScope=*/true, /*printAfterOnlyOnChange=*/false,
        /*printAfterOnlyOnFailure=*/false, llvm::errs());
  }
  {
    DiagnosticCollector diagnostics(context);
    if (mlir::failed(pm.run(module))) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ": the pipeline failed:\n", diagnostics.errors()));
    }
  }
  // Whatever cache types and rotations the pipeline chose, the CUDA kernels
  // keep them (a layout they cannot is refused when they are generated).
  Progress(progress, "  %s (%.2f s)\n", DescribePlan(module).c_str(), SecondsSince(start));
  Progress(progress, "  %s\n", DescribeWeightLayouts(module).c_str());
  if (options.target == "cuda" &&
      llvm::any_of(module.getOps<tfm::ParamOp>(),
                   [](tfm::ParamOp param) {
                     return param.getLayout().value_or(tfm::WeightLayout::gguf) != tfm::WeightLayout::gguf;
                   })) {
    return absl::InvalidArgumentError(absl::StrCat(
        source, ": --target cuda: the pipeline chose CPU weight layouts (choose-weight-layouts), "
                "but the CUDA kernels read GGUF's rows; leave the pass out"));
  }
  return absl::OkStatus();
}

// What shard-tensor-parallel gave the rank: where its program reads the
// weights it reads, and how the output is split.
std::string DescribeShards(mlir::ModuleOp module) {
  llvm::DenseSet<mlir::Operation*> read;
  int64_t in_place = 0, whole = 0, sidecar = 0, dequantized = 0;
  module.walk([&](tfm::WeightOp weight) {
    auto param = module.lookupSymbol<tfm::ParamOp>(weight.getParamAttr());
    if (!param || !read.insert(param).second) return;
    if (SourceWeights::ReadsRowsInPlace(param) && !WeightMaterializer::Derives(param)) {
      ++in_place;
    } else if (WeightMaterializer::Derives(param)) {
      ++sidecar;
    } else {
      ++whole;
    }
    if (param.getSliced() && param.getStorage() == tfm::StorageType::f32) {
      auto source = module.lookupSymbol<tfm::ParamOp>(param.getSlicedAttr());
      if (source && source.getStorage() != tfm::StorageType::f32) ++dequantized;
    }
  });
  std::string output = "the output projection whole";
  module.walk([&](dist::AllGatherOp gather) {
    int64_t vocabulary = 0;
    for (int64_t rank_columns : gather.getRankColumns()) vocabulary += rank_columns;
    output = absl::StrCat("the output projection split by vocabulary rows (",
                          gather.getRankColumns()[gather.getRank()], " of ", vocabulary,
                          ", then dist.all_gather)");
  });
  return absl::StrCat(
      "weights: ", in_place, " shards of rows read in place and ", whole,
      " whole weights (norms, the embedding: replicated) from the model file, ", sidecar,
      " in the rank's sidecar (fused projections of its rows, its columns of row-parallel "
      "weights",
      dequantized > 0 ? absl::StrCat("; ", dequantized, " dequantized to f32: their columns split "
                                     "a block")
                      : std::string(),
      "); ", output);
}

// The sidecar of rank `rank`'s derived weights: rank 0's is the executable's
// own (SidecarPathFor), the others' beside it, `out.rank1.kvw`.
std::string RankSidecarPathFor(const std::string& output_path, int64_t rank) {
  const std::string sidecar = SidecarPathFor(output_path);
  if (rank == 0) return sidecar;
  return absl::StrCat(sidecar.substr(0, sidecar.size() - 4), ".rank", rank, ".kvw");
}

// Rank `rank`'s program (shard-tensor-parallel) of `module` through the
// pipeline into an executable; rank 0's holds `other_ranks`.
absl::StatusOr<flatbuffers::DetachedBuffer> CompileRank(
    mlir::MLIRContext& context, mlir::ModuleOp module, int64_t rank, const std::string& source,
    const model::ModelFile& model, const tokenizer::Vocabulary& vocabulary,
    const std::string& chat_template, const SidecarTarget& sidecar, const OtherRanks& other_ranks,
    const CompileOptions& options, std::FILE* progress) {
  Progress(progress, "rank %lld of %lld:\n", static_cast<long long>(rank),
           static_cast<long long>(options.tensor_parallel));
  mlir::PassManager pm(&context);
  KVJIT_RETURN_IF_ERROR(BuildPipeline(module, source, options, pm, progress, rank).status());
  KVJIT_RETURN_IF_ERROR(RunPasses(context, pm, module, source, options, progress));
  Progress(progress, "  %s\n", DescribeShards(module).c_str());
  KVJIT_ASSIGN_OR_RETURN(
      flatbuffers::DetachedBuffer executable,
      WriteExecutable(module, model, vocabulary, chat_template, sidecar, nullptr, other_ranks));
#if KVJIT_HAVE_CUDA
  // Each rank's program gets its own kernels; its collectives run through
  // NCCL between them (runtime/cuda/CollectiveLayout.h).
  if (options.target == "cuda") {
    return AddCudaModule(executable, module, model, vocabulary, chat_template, sidecar, options,
                         progress, other_ranks);
  }
#endif
  return executable;
}

// `module` split over options.tensor_parallel ranks, each rank's program
// compiled from a copy of it, into one executable (kvx.fbs TensorParallel),
// which --verify runs with every rank's program against the unsplit
// `reference`.
absl::Status CompileTensorParallel(mlir::MLIRContext& context, mlir::ModuleOp module,
                                   mlir::ModuleOp reference,
                                   const std::string& reference_description,
                                   const std::string& source, const model::ModelFile& model,
                                   const tokenizer::Vocabulary& vocabulary,
                                   const std::string& chat_template,
                                   const std::string& output_path, const CompileOptions& options,
                                   std::FILE* progress) {
  KVJIT_ASSIGN_OR_RETURN(
      std::unique_ptr<EquivalenceChecker> verifier,
      StartVerification(reference, reference_description, model, options, progress));
  const Clock::time_point start = Clock::now();
  const std::string unverified_suffix = verifier != nullptr ? UnverifiedSuffix() : "";
  std::vector<SidecarTarget> sidecars;
  for (int64_t rank = 0; rank < options.tensor_parallel; ++rank) {
    sidecars.push_back(StagedSidecar(RankSidecarPathFor(output_path, rank), unverified_suffix));
  }
  // The other ranks first, from copies: rank 0's holds them and takes the
  // module itself.
  std::vector<flatbuffers::DetachedBuffer> others;
  for (int64_t rank = 1; rank < options.tensor_parallel; ++rank) {
    mlir::OwningOpRef<mlir::ModuleOp> copy(module.clone());
    KVJIT_ASSIGN_OR_RETURN(flatbuffers::DetachedBuffer executable,
                           CompileRank(context, *copy, rank, source, model, vocabulary,
                                       chat_template, sidecars[rank], {}, options, progress));
    others.push_back(std::move(executable));
  }
  OtherRanks other_ranks;
  for (const flatbuffers::DetachedBuffer& other : others) other_ranks.push_back(&other);
  KVJIT_ASSIGN_OR_RETURN(flatbuffers::DetachedBuffer executable,
                         CompileRank(context, module, 0, source, model, vocabulary, chat_template,
                                     sidecars[0], other_ranks, options, progress));
  Progress(progress, "writing %s (%lld ranks)…\n", output_path.c_str(),
           static_cast<long long>(options.tensor_parallel));
  KVJIT_RETURN_IF_ERROR(WriteCheckedExecutable(executable, output_path, sidecars,
                                               unverified_suffix, verifier.get(), options, progress));
  Progress(progress, "  %s (%zu bytes), weights stay in %s and the ranks' sidecars (%.2f s)\n",
           MiB(executable.size()).c_str(), executable.size(), model.path.c_str(),
           SecondsSince(start));
  return absl::OkStatus();
}

// `module` through the pipeline and the executable writer into
// `output_path`. `reference` is the whole-sequence IR --verify evaluates;
// `source` names the input in messages.
absl::Status CompileModule(mlir::MLIRContext& context, mlir::ModuleOp module,
                           mlir::ModuleOp reference, const std::string& reference_description,
                           const std::string& source, const model::ModelFile& model,
                           const tokenizer::Vocabulary& vocabulary,
                           const std::string& chat_template, const std::string& output_path,
                           const CompileOptions& options, std::FILE* progress) {
  if (options.tensor_parallel > 1) {
    return CompileTensorParallel(context, module, reference, reference_description, source, model,
                                 vocabulary, chat_template, output_path, options, progress);
  }
  mlir::PassManager pm(&context);
  CompileOptions resolved = options;
  KVJIT_ASSIGN_OR_RETURN(const PipelineForModule pipeline,
                         BuildPipeline(module, source, options, pm, progress));
  resolved.block_size = pipeline.kv_block_size;
  std::string described_reference = reference_description;
  if (pipeline.keep_layers) {
    KVJIT_RETURN_IF_ERROR(
        KeepFirstLayers(context, module, reference, *pipeline.keep_layers, source, progress));
    absl::StrAppend(&described_reference, " cut to its first ", *pipeline.keep_layers, " layers");
  }
  KVJIT_ASSIGN_OR_RETURN(
      std::unique_ptr<EquivalenceChecker> verifier,
      StartVerification(reference, described_reference, model, resolved, progress));

  if (options.verify_each_pass) verifier->CheckAfterEachPass(pm);
  KVJIT_RETURN_IF_ERROR(RunPasses(context, pm, module, source, options, progress));
  if (options.verify_each_pass) KVJIT_RETURN_IF_ERROR(ReportEachPass(*verifier, source, progress));

  Clock::time_point start = Clock::now();
  // The weights the passes made go beside the executable, which names them;
  // staged until the executable passes --verify.
  const std::string unverified_suffix = verifier != nullptr ? UnverifiedSuffix() : "";
  const SidecarTarget sidecar = StagedSidecar(SidecarPathFor(output_path), unverified_suffix);
  KVJIT_ASSIGN_OR_RETURN(flatbuffers::DetachedBuffer executable,
                         WriteExecutable(module, model, vocabulary, chat_template, sidecar));
#if KVJIT_HAVE_CUDA
  if (options.target == "cuda") {
    KVJIT_ASSIGN_OR_RETURN(executable,
                           AddCudaModule(executable, module, model, vocabulary, chat_template,
                                         sidecar, options, progress));
    start = Clock::now();
  }
#endif
  if (verifier != nullptr) {
    const Clock::time_point adopting = Clock::now();
    KVJIT_RETURN_IF_ERROR(verifier->AdoptCacheRounding(module));
    if (verifier->reference_description() != "the imported IR") {
      Progress(progress, "  the logits to match: %s (%.2f s)\n", verifier->reference_description().c_str(),
               SecondsSince(adopting));
    }
  }
  Progress(progress, "writing %s…\n", output_path.c_str());
  KVJIT_RETURN_IF_ERROR(WriteCheckedExecutable(executable, output_path, {sidecar},
                                               unverified_suffix, verifier.get(), options, progress));
  std::string weights_in = model.path;
  if (model.gguf_files != nullptr && model.gguf_files->parts().size() > 1) {
    absl::StrAppend(&weights_in, " and the split's other ",
                    model.gguf_files->parts().size() - 1, " parts");
  }
  Progress(progress, "  %s (%zu bytes), weights stay in %s (%.2f s)\n",
               MiB(executable.size()).c_str(), executable.size(), weights_in.c_str(),
               SecondsSince(start));
  return absl::OkStatus();
}

// What a compile takes from the model besides its IR: the weights and
// config, the tokenizer and the chat template.
struct ModelForCompile {
  model::ModelFile model;
  std::unique_ptr<tokenizer::Tokenizer> tokenizer;
  std::string chat_template;
};

absl::StatusOr<ModelForCompile> OpenModelForCompile(const std::string& model_path) {
  ModelForCompile opened;
  KVJIT_ASSIGN_OR_RETURN(opened.model, model::OpenModelFile(model_path));
  KVJIT_ASSIGN_OR_RETURN(opened.tokenizer, model::LoadTokenizer(opened.model));
  KVJIT_ASSIGN_OR_RETURN(opened.chat_template, model::LoadChatTemplate(opened.model));
  return opened;
}

// The context every compile parses and rewrites IR in.
void PrepareContext(mlir::MLIRContext& context) {
  mlir::DialectRegistry registry;
  RegisterKvjitDialects(registry);
  context.appendDialectRegistry(registry);
  // --dump_ir_after_all prints the whole module after each pass, which MLIR
  // allows only single-threaded; every kvjit pass runs on the module anyway.
  context.disableMultithreading();
}

}  // namespace

absl::Status CompileModel(const std::string& model_path, const std::string& output_path,
                          const CompileOptions& options, std::FILE* progress) {
  KVJIT_RETURN_IF_ERROR(CheckOptions(options));
  Clock::time_point start = Clock::now();
  Progress(progress, "importing %s…\n", model_path.c_str());
  KVJIT_ASSIGN_OR_RETURN(ModelForCompile opened, OpenModelForCompile(model_path));
  const model::ModelFile& model = opened.model;
  mlir::MLIRContext context;
  PrepareContext(context);
  KVJIT_ASSIGN_OR_RETURN(mlir::OwningOpRef<mlir::ModuleOp> module,
                         model::BuildDecoderModule(context, model.config, *model.weights));
  Progress(progress, "  %s, %s: %lld layers, %zu weights, %zu tokens (%.2f s)\n",
               model.format.c_str(), model.config.architecture.c_str(),
               static_cast<long long>(model.config.num_layers), model.weights->weights().size(),
               opened.tokenizer->vocabulary().tokens.size(), SecondsSince(start));
  return CompileModule(context, *module, *module, "the imported IR", model_path, model,
                       opened.tokenizer->vocabulary(), opened.chat_template, output_path, options,
                       progress);
}

absl::Status CompileIrFile(const std::string& ir_path, const std::string& model_path,
                           const std::string& output_path, const CompileOptions& options,
                           std::FILE* progress) {
  KVJIT_RETURN_IF_ERROR(CheckOptions(options));
  Clock::time_point start = Clock::now();
  Progress(progress, "reading %s with the weights of %s…\n", ir_path.c_str(), model_path.c_str());
  KVJIT_ASSIGN_OR_RETURN(ModelForCompile opened, OpenModelForCompile(model_path));
  const model::ModelFile& model = opened.model;
  mlir::MLIRContext context;
  PrepareContext(context);
  KVJIT_ASSIGN_OR_RETURN(mlir::OwningOpRef<mlir::ModuleOp> module, ParseIrFile(context, ir_path));
  KVJIT_RETURN_IF_ERROR(model::BindParams(*module, *model.weights));
  const std::vector<std::string> behind = PassesBehind(*module);
  Progress(progress, "  %s, %s: %lld layers, %zu weights, %zu tokens; the IR is past: %s (%.2f s)\n",
           model.format.c_str(), model.config.architecture.c_str(),
           static_cast<long long>(model.config.num_layers), model.weights->weights().size(),
           opened.tokenizer->vocabulary().tokens.size(),
           behind.empty() ? "none" : absl::StrJoin(behind, ", ").c_str(), SecondsSince(start));
  // The reference evaluator runs the whole-sequence function; a step
  // function is checked against the model's own IR instead.
  const bool whole_sequence =
      std::find(behind.begin(), behind.end(), "insert-kv-cache") == behind.end();
  mlir::OwningOpRef<mlir::ModuleOp> imported;
  if (!whole_sequence) {
    KVJIT_ASSIGN_OR_RETURN(imported,
                           model::BuildDecoderModule(context, model.config, *model.weights));
  }
  const std::string reference_description =
      whole_sequence ? absl::StrCat("the IR of ", ir_path)
                     : absl::StrCat("the IR imported from ", model_path, " (", ir_path,
                                    " is past insert-kv-cache)");
  return CompileModule(context, *module, whole_sequence ? *module : *imported,
                       reference_description, ir_path, model, opened.tokenizer->vocabulary(),
                       opened.chat_template, output_path, options, progress);
}

}  // namespace kvjit::codegen
