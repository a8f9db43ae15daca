#ifndef KVJIT_TESTS_UNIT_FRONTEND_TOKENIZER_CONFORMANCECASES_H
#define KVJIT_TESTS_UNIT_FRONTEND_TOKENIZER_CONFORMANCECASES_H

#include <cstdint>
#include <string>
#include <vector>

namespace kvjit::tokenizer::testing {

// `file` under the shared folder's testdata/tokenizer, or "" where absent.
std::string TokenizerDataPath(const std::string& file);

// False where `path` cannot be read.
bool ReadFile(const std::string& path, std::string* contents);

struct ConformanceCase {
  std::string text;
  std::vector<int32_t> expected_ids;
};

// Pairs the texts of a llama.cpp .inp file with the ids of its .out file,
// reporting a malformed pair as a test failure.
std::vector<ConformanceCase> ReadConformanceCases(const std::string& inputs,
                                                  const std::string& outputs);

}  // namespace kvjit::tokenizer::testing

#endif  // KVJIT_TESTS_UNIT_FRONTEND_TOKENIZER_CONFORMANCECASES_H
