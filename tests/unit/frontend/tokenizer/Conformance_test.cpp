// Checks the tokenizers against the cases llama.cpp ships with its vocab-only
// GGUF files: the ids of every text must match exactly.
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "frontend/gguf/GgufFile.h"
#include "frontend/tokenizer/GgufVocabulary.h"
#include "runtime/tokenizer/StreamingDecoder.h"
#include "runtime/tokenizer/Utf8.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/common/TestPaths.h"
#include "tests/unit/frontend/tokenizer/ConformanceCases.h"

namespace kvjit::tokenizer {
namespace {

using ::kvjit::tokenizer::testing::ConformanceCase;
using ::kvjit::tokenizer::testing::ReadConformanceCases;
using ::kvjit::tokenizer::testing::ReadFile;
using ::kvjit::tokenizer::testing::TokenizerDataPath;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::Not;

class ConformanceTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    const std::string gguf_path = TokenizerDataPath(GetParam());
    std::string inputs;
    std::string outputs;
    if (!ReadFile(gguf_path + ".inp", &inputs) ||
        !ReadFile(gguf_path + ".out", &outputs)) {
      GTEST_SKIP() << "tokenizer conformance files are absent beside "
                   << gguf_path
                   << " (set KVJIT_SHARED_DIR to the shared folder)";
    }
    auto file = gguf::GgufFile::Open(gguf_path);
    ASSERT_TRUE(file.ok()) << file.status();
    auto tokenizer = LoadTokenizerFromGguf(**file);
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
    tokenizer_ = std::move(*tokenizer);
    cases_ = ReadConformanceCases(inputs, outputs);
  }

  std::unique_ptr<Tokenizer> tokenizer_;
  std::vector<ConformanceCase> cases_;
};

TEST_P(ConformanceTest, EncodesEveryTextAsLlamaCppDoes) {
  ASSERT_FALSE(cases_.empty());
  int passed = 0;
  for (const ConformanceCase& test_case : cases_) {
    auto ids = tokenizer_->Encode(test_case.text, /*add_special=*/false,
                                  /*parse_special=*/false);
    ASSERT_TRUE(ids.ok()) << ids.status();
    if (*ids == test_case.expected_ids) {
      ++passed;
    } else {
      ADD_FAILURE() << "text \"" << test_case.text << "\"\n  expected: "
                    << absl::StrJoin(test_case.expected_ids, " ")
                    << "\n  got:      " << absl::StrJoin(*ids, " ");
    }
  }
  RecordProperty("cases_passed", passed);
  EXPECT_EQ(passed, static_cast<int>(cases_.size()));
}

TEST_P(ConformanceTest, DecodeRestoresEveryText) {
  for (const ConformanceCase& test_case : cases_) {
    EXPECT_EQ(tokenizer_->Decode(test_case.expected_ids), test_case.text);
  }
}

TEST_P(ConformanceTest, StreamingYieldsWholeCharacters) {
  const bool space_prefix = tokenizer_->vocabulary().add_space_prefix;
  for (const ConformanceCase& test_case : cases_) {
    if (test_case.text.empty()) continue;
    StreamingDecoder decoder(*tokenizer_);
    std::string streamed;
    for (int32_t id : test_case.expected_ids) {
      const std::string chunk = decoder.Push(id);
      EXPECT_TRUE(CheckUtf8(chunk).ok()) << "in \"" << test_case.text << "\"";
      streamed += chunk;
    }
    EXPECT_EQ(decoder.Flush(), "");
    EXPECT_EQ(streamed, (space_prefix ? " " : "") + test_case.text);
  }
}

INSTANTIATE_TEST_SUITE_P(LlamaCppVocabularies, ConformanceTest,
                         ::testing::Values("ggml-vocab-llama-spm.gguf",
                                           "ggml-vocab-gpt-2.gguf"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param == "ggml-vocab-llama-spm.gguf"
                                      ? "LlamaSpm"
                                      : "Gpt2";
                         });

bool Exists(const std::string& path) { return std::ifstream(path).good(); }

std::unique_ptr<Tokenizer> Load(const std::string& path) {
  auto file = gguf::GgufFile::Open(path);
  EXPECT_TRUE(file.ok()) << file.status();
  if (!file.ok()) return nullptr;
  auto tokenizer = LoadTokenizerFromGguf(**file);
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.status();
  return tokenizer.ok() ? std::move(*tokenizer) : nullptr;
}

TEST(LlamaSpmVocabulary, AddsBosAndReadsSpecialTokens) {
  const std::string path = TokenizerDataPath("ggml-vocab-llama-spm.gguf");
  if (!Exists(path)) GTEST_SKIP() << path << " is absent";
  auto tokenizer = Load(path);
  ASSERT_NE(tokenizer, nullptr);
  EXPECT_EQ(tokenizer->vocab_size(), 32000);
  EXPECT_EQ(tokenizer->bos_id(), 1);
  EXPECT_EQ(tokenizer->eos_id(), 2);
  EXPECT_TRUE(tokenizer->IsEndOfGeneration(2));
  auto ids = tokenizer->Encode("Hello world", /*add_special=*/true, false);
  ASSERT_TRUE(ids.ok()) << ids.status();
  EXPECT_THAT(*ids, ElementsAre(1, 15043, 3186));
  EXPECT_EQ(tokenizer->Decode(*ids), "Hello world");
  auto with_special =
      tokenizer->Encode("</s>Hello", false, /*parse_special=*/true);
  ASSERT_TRUE(with_special.ok()) << with_special.status();
  EXPECT_THAT(*with_special, ElementsAre(2, 15043));
}

TEST(Gpt2Vocabulary, ParsesEndOfTextOnlyWhenAsked) {
  const std::string path = TokenizerDataPath("ggml-vocab-gpt-2.gguf");
  if (!Exists(path)) GTEST_SKIP() << path << " is absent";
  auto tokenizer = Load(path);
  ASSERT_NE(tokenizer, nullptr);
  EXPECT_EQ(tokenizer->vocab_size(), 50257);
  EXPECT_TRUE(tokenizer->IsEndOfGeneration(50256));
  auto parsed = tokenizer->Encode("<|endoftext|>Hello", true, true);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_THAT(*parsed, ElementsAre(50256, 15496));
  auto literal = tokenizer->Encode("<|endoftext|>Hello", true, false);
  ASSERT_TRUE(literal.ok()) << literal.status();
  EXPECT_THAT(*literal, Not(Contains(50256)));
  EXPECT_EQ(tokenizer->Decode(*literal), "<|endoftext|>Hello");
}

TEST(Stories260KVocabulary, LoadsAndRoundTrips) {
  const std::string path = ::kvjit::testing::SharedPath("models/stories260K.gguf");
  if (!Exists(path)) GTEST_SKIP() << path << " is absent";
  auto tokenizer = Load(path);
  ASSERT_NE(tokenizer, nullptr);
  EXPECT_EQ(tokenizer->vocab_size(), 512);
  const std::string text =
      "Once upon a time, there was a little girl named Lily.";
  auto ids = tokenizer->Encode(text, /*add_special=*/true, false);
  ASSERT_TRUE(ids.ok()) << ids.status();
  ASSERT_FALSE(ids->empty());
  EXPECT_EQ(ids->front(), tokenizer->bos_id());
  EXPECT_LT(ids->size(), text.size() / 2);
  EXPECT_EQ(tokenizer->Decode(*ids), text);
}

}  // namespace
}  // namespace kvjit::tokenizer
