// kvjit compile MODEL -o model.kvx: the model through the whole pipeline into
// an executable the runtime loads.

#include <cstdio>
#include <string>

#include "absl/flags/flag.h"
#include "codegen/Compiler.h"
#include "tools/kvjit/SharedFlags.h"
#include "tools/kvjit/Subcommand.h"

ABSL_FLAG(std::string, target, "cpu", "the backend to compile for: cpu (cuda is not built yet)");
ABSL_FLAG(bool, dump_ir_after_all, false, "print the IR after every pass to stderr");

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
  options.dump_ir_after_all = absl::GetFlag(FLAGS_dump_ir_after_all);
  return codegen::CompileModel(arguments[0], output, options, stderr);
}

}  // namespace

Subcommand CompileCommand() {
  return {"compile", "compile a model (GGUF or Hugging Face directory) into a .kvx executable",
          "MODEL -o FILE.kvx", "tools/kvjit/CompileCommand.cpp", RunCompile,
          {"o", "block_size", "cache_dtype", "max_tokens_per_step", "kv_memory_mib"}};
}

}  // namespace kvjit::cli
