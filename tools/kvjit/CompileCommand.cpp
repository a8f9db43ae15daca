// kvjit compile MODEL -o model.kvx: the model through the whole pipeline into
// an executable the runtime loads; kvjit compile FILE.mlir --weights MODEL:
// IR at any level the pipeline accepts, bound to MODEL's weights, through the
// passes it is not yet past.

#include <cstdio>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/reflection.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "codegen/driver/Compiler.h"
#include "llvm/Support/Error.h"
#include "mlir/Tools/Plugins/PassPlugin.h"
#include "passes/Pipeline.h"
#include "runtime/core/StatusMacros.h"
#include "tools/kvjit/CompilerCommands.h"
#include "tools/kvjit/SharedFlags.h"
#include "passes/registration/KvjitRegistration.h"

ABSL_FLAG(std::string, target, "cpu",
          "the backend to compile for: cpu, or cuda (the CPU program plus CUDA kernels, compiled "
          "by NVRTC; no GPU needed)");
ABSL_FLAG(int, sm, 90,
          "with --target cuda: the GPU architecture of the cubin as compute capability x 10 "
          "(80: A100, 89: L4/RTX 40, 90: H100); newer GPUs JIT-compile the PTX beside it");
ABSL_FLAG(bool, fast_math, false,
          "with --target cuda: compile with NVRTC's --use_fast_math (faster exp, sqrt and "
          "division; less accurate)");
ABSL_FLAG(std::string, dump_cuda_source, "",
          "with --target cuda: also write the generated CUDA C++ (one translation unit) to this "
          "file");
ABSL_FLAG(std::string, cpu_isa, "host",
          "with --target cpu: the CPU instruction set whose kernels the weight layouts are chosen "
          "for (choose-weight-layouts): host (this machine's best, which $KVJIT_CPU_ISA caps), "
          "avx512vnni, avx2, portable, or none to keep every weight in GGUF's rows; an "
          "executable runs on any CPU, whatever it was compiled for");
ABSL_FLAG(std::string, cpu_model, "host",
          "with --target cpu: the microarchitecture whose measurements choose the weight layouts "
          "(choose-weight-layouts' measured policy): host (this machine's), generic, zen4 (AMD "
          "Zen 4) or zen5 (AMD Zen 5)");
ABSL_FLAG(bool, dump_ir_after_all, false, "print the IR after every pass to stderr");
ABSL_FLAG(bool, verify, false,
          "check the CPU step program's logits against the reference evaluator on the imported "
          "IR (for FILE.mlir: on that IR while it is a whole-sequence function, else on MODEL's "
          "imported IR) before writing the executable (on by default for models of at most 200M "
          "parameters); outside tolerance, the compile fails and writes nothing");
ABSL_FLAG(bool, no_verify, false, "skip the check of --verify, whatever the model's size");
ABSL_FLAG(bool, verify_each_pass, false,
          "also evaluate the IR after each pass with the reference evaluator, naming the first "
          "pass whose logits leave tolerance (implies --verify)");
ABSL_FLAG(std::string, weights, "",
          "for an IR input (FILE.mlir): the model (GGUF or Hugging Face directory) whose weights "
          "the IR's tfm.param symbols name, and whose config and tokenizer the executable takes");
ABSL_FLAG(std::string, pipeline, "",
          absl::StrCat("the passes to run, in MLIR's textual pass-pipeline syntax with pass "
                       "options, e.g. 'fuse-attention,insert-kv-cache{block-size=32},plan-memory'; "
                       "fuse-attention, insert-kv-cache and plan-memory are required, "
                       "fuse-projections, choose-weight-layouts and fuse-elementwise are optional, a "
                       "plugin's passes may join them; passes the "
                       "input IR is past are not run again. Default: ",
                       kvjit::KvjitPipelineText(kvjit::KvjitPipelineOptions()),
                       " (choose-weight-layouts for --cpu_isa, which --target cuda leaves out; "
                       "keep-first-layers first for --keep_layers), its options from --block_size, "
                       "--cache_dtype(_k, _v), --max_tokens_per_step and --kv_memory_mib"));
ABSL_FLAG(std::vector<std::string>, load_pass_plugin, {},
          "pass plugins to load before reading --pipeline (shared libraries with "
          "mlirGetPassPluginInfo, as mlir-opt's --load-pass-plugin loads), comma-separated");

namespace kvjit::cli {
namespace {

// The default pipeline's options, refused beside --pipeline, which spells
// out its passes' options itself.
absl::Status CheckPipelineFlags() {
  if (absl::GetFlag(FLAGS_pipeline).empty()) return absl::OkStatus();
  for (const char* flag :
       {"keep_layers", "block_size", "cache_dtype", "cache_dtype_k", "cache_dtype_v", "cache_rotation",
        "max_tokens_per_step", "kv_memory_mib", "cpu_isa", "cpu_model"}) {
    const absl::CommandLineFlag* reflection = absl::FindCommandLineFlag(flag);
    if (reflection->CurrentValue() != reflection->DefaultValue()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--", flag, " sets an option of the default pipeline; with --pipeline, give it as the "
          "pass's option there (keep-first-layers{layers=2}, "
          "insert-kv-cache{block-size=32 cache-dtype=f16}, "
          "plan-memory{max-tokens-per-step=512 kv-memory-mib=1024}, "
          "choose-weight-layouts{isa=avx2 cpu=generic})"));
    }
  }
  return absl::OkStatus();
}

// Registers every pass a pipeline may name: kvjit's, MLIR's common ones and
// those of the plugins --load_pass_plugin names.
absl::Status RegisterPipelinePasses() {
  RegisterKvjitPasses();
  for (const std::string& path : absl::GetFlag(FLAGS_load_pass_plugin)) {
    llvm::Expected<mlir::PassPlugin> plugin = mlir::PassPlugin::load(path);
    if (!plugin) {
      return absl::InvalidArgumentError(absl::StrCat("--load_pass_plugin ", path, ": ",
                                                     llvm::toString(plugin.takeError())));
    }
    plugin->registerPassRegistryCallbacks();
  }
  return absl::OkStatus();
}

absl::Status RunCompile(const std::vector<std::string>& arguments) {
  if (arguments.size() != 1) {
    return absl::InvalidArgumentError("expected one MODEL (or FILE.mlir with --weights MODEL)");
  }
  const std::string output = absl::GetFlag(FLAGS_o);
  if (output.empty() || output == "-") {
    return absl::InvalidArgumentError("name the executable to write with -o FILE");
  }
  codegen::CompileOptions options = CompileOptionsFromFlags();
  options.target = absl::GetFlag(FLAGS_target);
  const std::string cpu_isa = absl::GetFlag(FLAGS_cpu_isa);
  if (cpu_isa != "host" && cpu_isa != "none" && cpu_isa != "avx512vnni" && cpu_isa != "avx2" &&
      cpu_isa != "portable") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--cpu_isa must be host, avx512vnni, avx2, portable or none, got '", cpu_isa, "'"));
  }
  options.weight_layout_isa = cpu_isa;
  const std::string cpu_model = absl::GetFlag(FLAGS_cpu_model);
  if (cpu_model != "host" && cpu_model != "generic" && cpu_model != "zen4" && cpu_model != "zen5") {
    return absl::InvalidArgumentError(
        absl::StrCat("--cpu_model must be host, generic, zen4 or zen5, got '", cpu_model, "'"));
  }
  options.weight_layout_cpu = cpu_model;
  options.cuda_arch = absl::GetFlag(FLAGS_sm);
  options.cuda_fast_math = absl::GetFlag(FLAGS_fast_math);
  options.cuda_source_path = absl::GetFlag(FLAGS_dump_cuda_source);
  options.dump_ir_after_all = absl::GetFlag(FLAGS_dump_ir_after_all);
  options.verify_each_pass = absl::GetFlag(FLAGS_verify_each_pass);
  const bool verify = absl::GetFlag(FLAGS_verify) || options.verify_each_pass;
  if (verify && absl::GetFlag(FLAGS_no_verify)) {
    return absl::InvalidArgumentError("--no_verify contradicts --verify and --verify_each_pass");
  }
  if (verify) options.verification = codegen::Verification::kOn;
  if (absl::GetFlag(FLAGS_no_verify)) options.verification = codegen::Verification::kOff;
  if (const int threads = absl::GetFlag(FLAGS_threads); threads > 0) {
    options.verify_threads = threads;
  }
  KVJIT_RETURN_IF_ERROR(CheckPipelineFlags());
  options.pipeline = absl::GetFlag(FLAGS_pipeline);
  KVJIT_RETURN_IF_ERROR(RegisterPipelinePasses());
  const std::string weights = absl::GetFlag(FLAGS_weights);
  if (!weights.empty()) {
    return codegen::CompileIrFile(arguments[0], weights, output, options, stderr);
  }
  if (absl::EndsWith(arguments[0], ".mlir")) {
    return absl::InvalidArgumentError(absl::StrCat(
        arguments[0], " is IR: name the model whose weights it reads with --weights MODEL"));
  }
  return codegen::CompileModel(arguments[0], output, options, stderr);
}

}  // namespace

Subcommand CompileCommand() { return CompilerCommand("compile", RunCompile); }

}  // namespace kvjit::cli
