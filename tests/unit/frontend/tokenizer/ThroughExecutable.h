#ifndef KVJIT_TESTS_UNIT_FRONTEND_TOKENIZER_THROUGHEXECUTABLE_H_
#define KVJIT_TESTS_UNIT_FRONTEND_TOKENIZER_THROUGHEXECUTABLE_H_

#include <memory>

#include "absl/status/statusor.h"
#include "runtime/tokenizer/Tokenizer.h"
#include "runtime/tokenizer/Vocabulary.h"

namespace kvjit::tokenizer {

// The tokenizer of `vocabulary` after it is written into an executable's
// Tokenizer table and read back, as `kvjit run` carries it from the
// compiler to the runtime.
absl::StatusOr<std::unique_ptr<Tokenizer>> TokenizerThroughExecutable(
    const Vocabulary& vocabulary);

}  // namespace kvjit::tokenizer

#endif  // KVJIT_TESTS_UNIT_FRONTEND_TOKENIZER_THROUGHEXECUTABLE_H_
