#ifndef KVJIT_TOOLS_KVJIT_KVXTOKENIZER_H_
#define KVJIT_TOOLS_KVJIT_KVXTOKENIZER_H_

#include <memory>

#include "absl/status/statusor.h"
#include "frontend/tokenizer/Tokenizer.h"
#include "runtime/schema/kvx_generated.h"

namespace kvjit::cli {

// The tokenizer an executable carries (codegen writes the Vocabulary into
// its Tokenizer table; this reads it back).
absl::StatusOr<std::unique_ptr<tokenizer::Tokenizer>> TokenizerFromExecutable(
    const kvx::Executable& executable);

}  // namespace kvjit::cli

#endif  // KVJIT_TOOLS_KVJIT_KVXTOKENIZER_H_
