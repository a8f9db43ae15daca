#include "tools/kvjit/CompileOnTheFly.h"

#include <cstdlib>
#include <filesystem>
#include <functional>
#include <optional>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "frontend/gguf/GgufSplit.h"
#include "runtime/core/BuildInfo.h"
#include "runtime/core/StatusMacros.h"
#include "runtime/cpu/CpuIsa.h"
#include "runtime/schema/SchemaVersion.h"
#include "tools/kvjit/CompileCache.h"
#include "tools/kvjit/CompilerCommands.h"

namespace kvjit::cli {
namespace {

std::filesystem::path CacheDirectory() {
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) {
    return std::filesystem::path(xdg) / "kvjit" / "compiled";
  }
  const char* home = std::getenv("HOME");
  return std::filesystem::path(home ? home : "/tmp") / ".cache" / "kvjit" / "compiled";
}

// Everything the executable depends on: the model's files as they are on
// disk (path, size, modification time; for a Hugging Face directory, its
// top-level files; for a split GGUF, every part), the options, the compiler
// (its version, and its file as above, so that a rebuilt compiler, whose
// passes may choose otherwise, compiles again), the schema's version (a
// runtime refuses an executable of another schema), and the CPU the weight
// layouts are chosen for (the host's ISA and microarchitecture, as
// kvjit-compiler resolves `host`).
std::string CacheKey(const std::filesystem::path& model, const codegen::CompileOptions& options) {
  std::error_code error;
  std::string identity = absl::StrCat(std::filesystem::absolute(model, error).string(), "|",
                                      KvjitVersion(), "|schema ", kvx::kSchemaVersion, "|",
                                      cpu::CpuIsaName(cpu::BestCpuIsa()), "|",
                                      cpu::CpuModelName(cpu::HostCpuModel()));
  auto add_file = [&](const std::filesystem::path& file) {
    absl::StrAppend(&identity, "|", file.filename().string(), ":",
                    std::filesystem::file_size(file, error), ":",
                    std::filesystem::last_write_time(file, error).time_since_epoch().count());
  };
  if (std::filesystem::is_directory(model, error)) {
    for (const auto& entry : std::filesystem::directory_iterator(model, error)) {
      if (entry.is_regular_file(error)) add_file(entry.path());
    }
  } else if (std::optional<std::vector<std::string>> parts = gguf::SplitPartPaths(model.string())) {
    for (const std::string& part : *parts) add_file(part);
  } else {
    add_file(model);
  }
  if (absl::StatusOr<std::string> compiler = CompilerPath(); compiler.ok()) add_file(*compiler);
  absl::StrAppend(&identity, "|", options.target, "|", options.keep_layers, " layers|",
                  options.tensor_parallel, " ranks|", options.block_size, "|",
                  options.cache_dtype, "|", options.cache_dtype_k, "|", options.cache_dtype_v, "|", options.cache_rotation, "|",
                  options.max_tokens_per_step, "|",
                  options.kv_memory_mib, "|", options.cuda_arch, "|", options.cuda_fast_math);
  return absl::StrFormat("%016x", std::hash<std::string>()(identity));
}

// `kvjit compile` with `options`, as kvjit-compiler's command line.
std::vector<std::string> CompileArguments(const std::string& model, const std::string& output,
                                          const codegen::CompileOptions& options) {
  std::vector<std::string> arguments = {
      "compile", model, "-o", output, absl::StrCat("--target=", options.target),
      absl::StrCat("--keep_layers=", options.keep_layers),
      absl::StrCat("--tp=", options.tensor_parallel),
      absl::StrCat("--block_size=", options.block_size),
      absl::StrCat("--cache_dtype=", options.cache_dtype),
      absl::StrCat("--cache_dtype_k=", options.cache_dtype_k),
      absl::StrCat("--cache_dtype_v=", options.cache_dtype_v),
      absl::StrCat("--cache_rotation=", options.cache_rotation),
      absl::StrCat("--max_tokens_per_step=", options.max_tokens_per_step),
      absl::StrCat("--kv_memory_mib=", options.kv_memory_mib),
      absl::StrCat("--sm=", options.cuda_arch),
      absl::StrCat("--fast_math=", options.cuda_fast_math ? "true" : "false")};
  return arguments;
}

}  // namespace

absl::StatusOr<std::string> ExecutablePathFor(const std::string& model_or_kvx,
                                              const codegen::CompileOptions& options) {
  if (absl::EndsWith(model_or_kvx, ".kvx")) return model_or_kvx;
  // Any part of a split GGUF names the same model: one compile, under the
  // first part's name.
  std::optional<std::vector<std::string>> parts = gguf::SplitPartPaths(model_or_kvx);
  const std::filesystem::path model(parts ? parts->front() : model_or_kvx);
  std::error_code error;
  if (!std::filesystem::exists(model_or_kvx, error)) {
    return absl::NotFoundError(absl::StrCat(model_or_kvx, ": no such model file or directory"));
  }
  const std::filesystem::path directory = CacheDirectory();
  std::filesystem::create_directories(directory, error);
  if (error) {
    return absl::PermissionDeniedError(
        absl::StrCat(directory.string(), ": cannot create the compile cache: ", error.message()));
  }
  const std::string name = model.filename().empty() ? model.parent_path().filename().string()
                                                    : model.filename().string();
  const std::string executable =
      (directory / absl::StrCat(name, "-", CacheKey(model, options), ".kvx")).string();
  if (std::filesystem::exists(executable, error)) {
    MarkCompileCacheEntryUsed(executable);
    return executable;
  }
  KVJIT_ASSIGN_OR_RETURN(const uint64_t limit_bytes, CompileCacheLimitBytes());
  std::fprintf(stderr, "compiling %s (cached as %s)\n", model_or_kvx.c_str(), executable.c_str());
  // The part named, whose reader finds the others or names the one missing.
  KVJIT_RETURN_IF_ERROR(RunCompiler(CompileArguments(model_or_kvx, executable, options)));
  KVJIT_ASSIGN_OR_RETURN(const CompileCacheTrim trim, TrimCompileCache(directory, limit_bytes, executable));
  if (trim.removed_entries > 0) {
    std::fprintf(stderr,
                 "compile cache: removed %d of the least recently used executables (%.1f MiB) to stay within "
                 "%.0f MiB ($KVJIT_COMPILE_CACHE_MIB)\n",
                 trim.removed_entries, trim.removed_bytes / 1048576.0, limit_bytes / 1048576.0);
  }
  return executable;
}

}  // namespace kvjit::cli
