// kvjit compile MODEL -o model.kvx: the model through the whole pipeline into
// an executable the runtime loads.

#include <cstdio>
#include <string>

#include "absl/flags/flag.h"
#include "codegen/Compiler.h"
#include "tools/kvjit/SharedFlags.h"
#include "tools/kvjit/CompilerCommands.h"

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
ABSL_FLAG(bool, dump_ir_after_all, false, "print the IR after every pass to stderr");
ABSL_FLAG(bool, verify, false,
          "check the CPU step program's logits against the reference evaluator on the imported "
          "IR before writing the executable (on by default for models of at most 200M "
          "parameters); outside tolerance, the compile fails and writes nothing");
ABSL_FLAG(bool, no_verify, false, "skip the check of --verify, whatever the model's size");
ABSL_FLAG(bool, verify_each_pass, false,
          "also evaluate the IR after each pass with the reference evaluator, naming the first "
          "pass whose logits leave tolerance (implies --verify)");

namespace kvjit::cli {
namespace {

absl::Status RunCompile(const std::vector<std::string>& arguments) {
  if (arguments.size() != 1) return absl::InvalidArgumentError("expected one MODEL argument");
  const std::string output = absl::GetFlag(FLAGS_o);
  if (output.empty() || output == "-") {
    return absl::InvalidArgumentError("name the executable to write with -o FILE");
  }
  codegen::CompileOptions options = CompileOptionsFromFlags();
  options.target = absl::GetFlag(FLAGS_target);
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
  return codegen::CompileModel(arguments[0], output, options, stderr);
}

}  // namespace

Subcommand CompileCommand() { return CompilerCommand("compile", RunCompile); }

}  // namespace kvjit::cli
