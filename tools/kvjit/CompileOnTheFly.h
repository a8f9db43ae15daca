#ifndef KVJIT_TOOLS_KVJIT_COMPILEONTHEFLY_H_
#define KVJIT_TOOLS_KVJIT_COMPILEONTHEFLY_H_

#include <string>

#include "absl/status/statusor.h"
#include "codegen/driver/Compiler.h"

namespace kvjit::cli {

// The .kvx to run for `model_or_kvx`: a .kvx file itself; for a GGUF file or
// a Hugging Face directory, an executable compiled with `options` into
// ~/.cache/kvjit/compiled (reused while the model, the options and this kvjit
// are unchanged; the cache is kept within CompileCacheLimitBytes(), least
// recently used entries first out, CompileCache.h).
absl::StatusOr<std::string> ExecutablePathFor(const std::string& model_or_kvx,
                                              const codegen::CompileOptions& options);

}  // namespace kvjit::cli

#endif  // KVJIT_TOOLS_KVJIT_COMPILEONTHEFLY_H_
