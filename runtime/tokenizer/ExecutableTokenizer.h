#ifndef KVJIT_RUNTIME_TOKENIZER_EXECUTABLETOKENIZER_H_
#define KVJIT_RUNTIME_TOKENIZER_EXECUTABLETOKENIZER_H_

#include <memory>

#include "absl/status/statusor.h"
#include "runtime/tokenizer/Tokenizer.h"
#include "runtime/schema/kvx_generated.h"

namespace kvjit::tokenizer {

// The tokenizer an executable carries (codegen writes the Vocabulary into
// its Tokenizer table; this reads it back).
absl::StatusOr<std::unique_ptr<Tokenizer>> TokenizerFromExecutable(
    const kvx::Executable& executable);

}  // namespace kvjit::tokenizer

#endif  // KVJIT_RUNTIME_TOKENIZER_EXECUTABLETOKENIZER_H_
