// kvjit verify MODEL_OR_KVX: a compiled step program's logits against the
// reference evaluator's on the tfm IR as imported (codegen/equivalence/EquivalenceChecker.h). A
// .kvx is checked as it is; a model is compiled first, with the compile
// flags, into a file that is removed afterwards.

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "codegen/driver/Compiler.h"
#include "codegen/equivalence/EquivalenceChecker.h"
#include "tools/kvjit/CompilerCommands.h"
#include "tools/kvjit/SharedFlags.h"

namespace kvjit::cli {
namespace {

int VerifyThreads() {
  const int threads = absl::GetFlag(FLAGS_threads);
  return threads > 0 ? threads : codegen::CompileOptions().verify_threads;
}

absl::Status RunVerify(const std::vector<std::string>& arguments) {
  if (arguments.size() != 1) return absl::InvalidArgumentError("expected one MODEL_OR_KVX argument");
  const std::string& path = arguments[0];
  if (absl::EndsWith(path, ".kvx")) return codegen::VerifyExecutableFile(path, VerifyThreads(), stderr);
  codegen::CompileOptions options = CompileOptionsFromFlags();
  options.verification = codegen::Verification::kOn;
  options.verify_threads = VerifyThreads();
  const std::string scratch = (std::filesystem::temp_directory_path() /
                               absl::StrCat("kvjit-verify-", getpid(), ".kvx"))
                                  .string();
  const absl::Status status = codegen::CompileModel(path, scratch, options, stderr);
  std::error_code ignored;
  std::filesystem::remove(scratch, ignored);
  return status;
}

}  // namespace

Subcommand VerifyCommand() { return CompilerCommand("verify", RunVerify); }

}  // namespace kvjit::cli
