#include "tools/kvjit/CompilerCommands.h"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

extern char** environ;

namespace kvjit::cli {

const std::vector<Subcommand>& CompilerCommandDescriptions() {
  static const std::vector<Subcommand> commands = {
      {"inspect", "show a model's architecture, hyper-parameters, tensors and KV-cache cost",
       "MODEL", "tools/kvjit/InspectCommand.cpp", nullptr},
      {"tokenize", "print the token ids of TEXT, space-separated (BOS where the model adds one)",
       "MODEL TEXT [--no_bos] [--parse_special]", "tools/kvjit/TokenizeCommand.cpp", nullptr},
      {"import", "write a model's tfm IR (its math, no cache) as MLIR text", "MODEL [-o FILE]",
       "tools/kvjit/ImportCommand.cpp", nullptr, {"o"}},
      {"reference",
       "generate greedily with the reference evaluator (full recompute per token, no cache)",
       "MODEL -p PROMPT [-n N]", "tools/kvjit/ReferenceCommand.cpp", nullptr, {"p", "n"}},
      {"compile",
       "compile a model (GGUF or Hugging Face directory), or tfm IR with a model's weights, into "
       "a .kvx executable",
       "MODEL|FILE.mlir --weights MODEL -o FILE.kvx [--pipeline P] [--load_pass_plugin F.so] "
       "[--target cpu|cuda [--sm 90] [--fast_math] [--dump_cuda_source F]] "
       "[--verify|--no_verify] [--verify_each_pass]",
       "tools/kvjit/CompileCommand.cpp", nullptr,
       {"o", "block_size", "cache_dtype", "cache_dtype_k", "cache_dtype_v", "cache_rotation", "max_tokens_per_step", "kv_memory_mib", "threads"}},
      {"verify",
       "check a compiled step program's logits against the reference evaluator on the imported "
       "IR (a MODEL is compiled first, with the compile flags)",
       "MODEL_OR_KVX", "tools/kvjit/VerifyCommand.cpp", nullptr,
       {"block_size", "cache_dtype", "cache_dtype_k", "cache_dtype_v", "cache_rotation", "max_tokens_per_step", "kv_memory_mib", "threads"}},
  };
  return commands;
}

Subcommand CompilerCommand(absl::string_view name,
                           absl::Status (*run)(const std::vector<std::string>& arguments)) {
  for (Subcommand command : CompilerCommandDescriptions()) {
    if (name == command.name) {
      command.run = run;
      return command;
    }
  }
  std::fprintf(stderr, "kvjit: no compiler command '%s' is described\n", std::string(name).c_str());
  std::abort();  // a programming error in this file, caught by any test run
}

absl::StatusOr<std::string> CompilerPath() {
  if (const char* path = std::getenv("KVJIT_COMPILER"); path != nullptr && *path != '\0') {
    if (access(path, X_OK) != 0) {
      return absl::NotFoundError(absl::StrCat("$KVJIT_COMPILER names ", path,
                                              ", which is not an executable file"));
    }
    return std::string(path);
  }
  std::error_code error;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
  const std::string beside = (self.parent_path() / "kvjit-compiler").string();
  if (error || access(beside.c_str(), X_OK) != 0) {
    return absl::NotFoundError(absl::StrCat(
        "compiling needs kvjit-compiler, which is not beside this kvjit (", beside,
        "): build it (it needs LLVM and MLIR), set $KVJIT_COMPILER, or run a .kvx compiled "
        "elsewhere"));
  }
  return beside;
}

namespace {

std::vector<char*> Argv(const std::string& program, const std::vector<std::string>& arguments) {
  std::vector<char*> argv = {const_cast<char*>(program.c_str())};
  for (const std::string& argument : arguments) argv.push_back(const_cast<char*>(argument.c_str()));
  argv.push_back(nullptr);
  return argv;
}

}  // namespace

absl::Status ExecCompiler(const std::vector<std::string>& arguments) {
  absl::StatusOr<std::string> compiler = CompilerPath();
  if (!compiler.ok()) return compiler.status();
  std::vector<char*> argv = Argv(*compiler, arguments);
  execv(compiler->c_str(), argv.data());
  return absl::ErrnoToStatus(errno, absl::StrCat("cannot start ", *compiler));
}

absl::Status RunCompiler(const std::vector<std::string>& arguments) {
  absl::StatusOr<std::string> compiler = CompilerPath();
  if (!compiler.ok()) return compiler.status();
  std::vector<char*> argv = Argv(*compiler, arguments);
  pid_t child = 0;
  if (const int error = posix_spawn(&child, compiler->c_str(), nullptr, nullptr, argv.data(), environ);
      error != 0) {
    return absl::ErrnoToStatus(error, absl::StrCat("cannot start ", *compiler));
  }
  int status = 0;
  while (waitpid(child, &status, 0) < 0) {
    if (errno != EINTR) return absl::ErrnoToStatus(errno, absl::StrCat("waiting for ", *compiler));
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(
      "`kvjit ", absl::StrJoin(arguments, " "), "` failed (",
      WIFEXITED(status) ? absl::StrCat("exit status ", WEXITSTATUS(status))
                        : absl::StrCat("signal ", WTERMSIG(status)),
      "); its messages are above"));
}

}  // namespace kvjit::cli
