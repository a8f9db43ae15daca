#include "tests/unit/frontend/tokenizer/ConformanceCases.h"

#include <fstream>
#include <sstream>

#include "gtest/gtest.h"
#include "tests/unit/common/TestPaths.h"

namespace kvjit::tokenizer::testing {

std::string TokenizerDataPath(const std::string& file) {
  return ::kvjit::testing::SharedPath("testdata/tokenizer/" + file);
}

bool ReadFile(const std::string& path, std::string* contents) {
  std::ifstream stream(path, std::ios::binary);
  if (!stream) return false;
  std::ostringstream buffer;
  buffer << stream.rdbuf();
  *contents = buffer.str();
  return true;
}

// The .inp file ends every text with "\n__ggml_vocab_test__\n"; the .out
// file holds one line of space-separated ids per text.
std::vector<ConformanceCase> ReadConformanceCases(const std::string& inputs,
                                                  const std::string& outputs) {
  const std::string separator = "\n__ggml_vocab_test__\n";
  std::vector<ConformanceCase> cases;
  size_t start = 0;
  for (size_t end; (end = inputs.find(separator, start)) != std::string::npos;
       start = end + separator.size()) {
    cases.push_back({inputs.substr(start, end - start), {}});
  }
  EXPECT_EQ(start, inputs.size()) << "text after the last separator";

  std::istringstream lines(outputs);
  std::string line;
  size_t index = 0;
  while (std::getline(lines, line)) {
    if (index == cases.size()) {
      ADD_FAILURE() << "more id lines than texts";
      break;
    }
    std::istringstream ids(line);
    for (int32_t id; ids >> id;) cases[index].expected_ids.push_back(id);
    ++index;
  }
  EXPECT_EQ(index, cases.size()) << "id lines and texts differ in number";
  return cases;
}

}  // namespace kvjit::tokenizer::testing
