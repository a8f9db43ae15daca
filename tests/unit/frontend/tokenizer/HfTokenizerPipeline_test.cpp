// kvjit's tokenizer.json reader against Hugging Face's `tokenizers` package:
// tests/data/hf_tokenizers holds a random-text corpus, small tokenizer.json
// files in the layouts of Llama 3 and Qwen2.5 (and two that exercise every
// Split behaviour and normalizer), and the ids `tokenizers` gives for each
// text; tools/scripts/hf_tokenizer_cases.py writes them.

#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "frontend/gguf/GgufFile.h"
#include "frontend/huggingface/HfTokenizerJson.h"
#include "frontend/tokenizer/GgufVocabulary.h"
#include "frontend/tokenizer/HfVocabulary.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/unit/common/TestPaths.h"
#include "tests/unit/frontend/tokenizer/TokenizerJsonOf.h"
#include "tests/unit/frontend/huggingface/SafetensorsTestFiles.h"
#include "tests/unit/frontend/tokenizer/ConformanceCases.h"
#include "tests/unit/frontend/tokenizer/ThroughExecutable.h"

namespace kvjit::tokenizer {
namespace {

using ::kvjit::safetensors::testing::ErrorMessage;
using ::kvjit::safetensors::testing::TempDir;
using ::kvjit::tokenizer::testing::ReadFile;
using ::testing::HasSubstr;

constexpr char kSmolLm2Gguf[] = "SmolLM2-135M-Instruct.Q4_1.gguf";

// The JSON of tests/data/hf_tokenizers/`file`, reporting a failure where it
// cannot be read.
nlohmann::json ReadCaseFile(const std::string& file) {
  const std::string path = kvjit::testing::TestDataPath("hf_tokenizers/" + file);
  std::string text;
  if (path.empty() || !ReadFile(path, &text)) {
    ADD_FAILURE() << "cannot read tests/data/hf_tokenizers/" << file;
    return nullptr;
  }
  return nlohmann::json::parse(text);
}

absl::StatusOr<std::unique_ptr<Tokenizer>> TokenizerFromJsonText(
    const std::string& json_text, const std::string& source) {
  absl::StatusOr<hf::BpeTokenizerJson> json =
      hf::ParseBpeTokenizerJson(json_text, source);
  if (!json.ok()) return json.status();
  absl::StatusOr<Vocabulary> vocabulary =
      VocabularyFromHfTokenizerJson(*json, source);
  if (!vocabulary.ok()) return vocabulary.status();
  return TokenizerThroughExecutable(*vocabulary);
}

// Encodes every corpus text as `tokenizers` does (every added token found,
// no BOS or EOS added) and compares with `expected_ids`, one list per text.
void ExpectIdsOnCorpus(const Tokenizer& tokenizer,
                       const nlohmann::json& expected_ids) {
  const nlohmann::json corpus = ReadCaseFile("corpus.json");
  ASSERT_TRUE(corpus.is_array());
  ASSERT_EQ(corpus.size(), expected_ids.size());
  int mismatches = 0;
  for (size_t i = 0; i < corpus.size(); ++i) {
    const std::string text = corpus[i].get<std::string>();
    absl::StatusOr<std::vector<int32_t>> ids =
        tokenizer.Encode(text, /*add_special=*/false, /*parse_special=*/true);
    ASSERT_TRUE(ids.ok()) << "text " << i << ": " << ids.status();
    const std::vector<int32_t> expected = expected_ids[i];
    if (*ids != expected && ++mismatches <= 5) {
      ADD_FAILURE() << "text " << i << " \"" << text
                    << "\"\n  expected: " << absl::StrJoin(expected, " ")
                    << "\n  got:      " << absl::StrJoin(*ids, " ");
    }
  }
  EXPECT_EQ(mismatches, 0) << "of " << corpus.size() << " texts";
}

class HfTokenizerFileTest : public ::testing::TestWithParam<std::string> {};

TEST_P(HfTokenizerFileTest, EncodesCorpusAsHuggingFaceTokenizers) {
  const std::string name = GetParam();
  const std::string path =
      kvjit::testing::TestDataPath("hf_tokenizers/" + name + ".tokenizer.json");
  std::string json_text;
  ASSERT_TRUE(!path.empty() && ReadFile(path, &json_text)) << path;
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer =
      TokenizerFromJsonText(json_text, path);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  ExpectIdsOnCorpus(**tokenizer, ReadCaseFile(name + ".ids.json"));
}

INSTANTIATE_TEST_SUITE_P(Files, HfTokenizerFileTest,
                         ::testing::Values("llama3_style", "qwen25_style",
                                           "split_behaviors", "nfd_digits"));

// SmolLM2's tokenizer.json rebuilt from its GGUF, as
// tools/scripts/hf_tokenizer_cases.py rebuilds it for `tokenizers`, with the
// pre-tokenizer of SmolLM2's official file.
std::string SmolLm2TokenizerJson(const Vocabulary& vocabulary) {
  return TokenizerJsonOf(vocabulary, nlohmann::json::parse(R"({"type": "Sequence",
        "pretokenizers": [{"type": "Digits", "individual_digits": true},
          {"type": "ByteLevel", "add_prefix_space": false,
           "trim_offsets": true, "use_regex": true}]})"));
}

class SmolLm2TokenizerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string path = kvjit::testing::DownloadedModelPath(kSmolLm2Gguf);
    if (path.empty()) {
      GTEST_SKIP() << kSmolLm2Gguf
                   << " is absent (tools/scripts/fetch_model.sh fetches it)";
    }
    absl::StatusOr<std::unique_ptr<gguf::GgufFile>> file =
        gguf::GgufFile::Open(path);
    ASSERT_TRUE(file.ok()) << file.status();
    absl::StatusOr<Vocabulary> vocabulary = ReadVocabularyFromGguf(**file);
    ASSERT_TRUE(vocabulary.ok()) << vocabulary.status();
    gguf_vocabulary_ = *vocabulary;
    absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer =
        CreateTokenizer(*std::move(vocabulary));
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
    gguf_tokenizer_ = *std::move(tokenizer);
  }

  Vocabulary gguf_vocabulary_;
  std::unique_ptr<Tokenizer> gguf_tokenizer_;
};

TEST_F(SmolLm2TokenizerTest, TokenizerJsonEncodesCorpusAsHuggingFaceTokenizers) {
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer = TokenizerFromJsonText(
      SmolLm2TokenizerJson(gguf_vocabulary_), "SmolLM2 tokenizer.json");
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  EXPECT_EQ((*tokenizer)->vocabulary().pre_tokenizer, PreTokenizer::kSmolLm);
  EXPECT_EQ((*tokenizer)->vocabulary().tokens, gguf_vocabulary_.tokens);
  EXPECT_EQ((*tokenizer)->vocabulary().token_types,
            gguf_vocabulary_.token_types);
  ExpectIdsOnCorpus(**tokenizer, ReadCaseFile("smollm2.ids.json"));
}

TEST_F(SmolLm2TokenizerTest, GgufEncodesCorpusAsHuggingFaceTokenizers) {
  ExpectIdsOnCorpus(*gguf_tokenizer_, ReadCaseFile("smollm2.ids.json"));
}

TEST(HfTokenizerDirectory, NamesFileAndJsonPathOfAnUnknownNormalizer) {
  const std::string path = kvjit::testing::TestDataPath(
      "hf_tokenizers/qwen25_style.tokenizer.json");
  std::string json_text;
  ASSERT_TRUE(!path.empty() && ReadFile(path, &json_text)) << path;
  nlohmann::json json = nlohmann::json::parse(json_text);
  json["normalizer"] = nlohmann::json::parse(
      R"({"type": "Sequence", "normalizers": [{"type": "NFC"},
          {"type": "Precompiled", "precompiled_charsmap": "AAAA"}]})");
  TempDir directory;
  directory.WriteFile("tokenizer.json", json.dump());
  EXPECT_THAT(ErrorMessage(LoadTokenizerFromHfDirectory(directory.path())),
              HasSubstr("/tokenizer.json: normalizer.normalizers[1]: "
                        "normalizer type 'Precompiled' is not supported"));
}

TEST(HfTokenizerDirectory, NamesFileAndJsonPathOfAnUnknownPreTokenizer) {
  const std::string path = kvjit::testing::TestDataPath(
      "hf_tokenizers/llama3_style.tokenizer.json");
  std::string json_text;
  ASSERT_TRUE(!path.empty() && ReadFile(path, &json_text)) << path;
  nlohmann::json json = nlohmann::json::parse(json_text);
  json["pre_tokenizer"]["pretokenizers"][0] = {{"type", "Punctuation"}};
  TempDir directory;
  directory.WriteFile("tokenizer.json", json.dump());
  EXPECT_THAT(ErrorMessage(LoadTokenizerFromHfDirectory(directory.path())),
              HasSubstr("/tokenizer.json: pre_tokenizer.pretokenizers[0]: "
                        "pre-tokenizer type 'Punctuation' is not supported"));
}

// Tokenizer.json files that once encoded or decoded differently after the
// trip through an executable (caught by tests/fuzz/tokenizer_json_fuzzer,
// whose corpus/tokenizer_json holds them as seeds): U+0000 in Metaspace's
// replacement, a Replace normalizer's pattern and a Replace decoder's
// pattern, which the table cut short, and merges of pieces with a space.
constexpr char kCharacterBpeVocab[] =
    R"("vocab": {"<unk>": 0, "a": 1, "b": 2, " ": 3, "\u2581": 4, "\u0000": 5,
                 "a ": 6, "a b": 7, "x": 8})";
struct ThroughExecutableCase {
  const char* step;
  const char* merges;
};
constexpr ThroughExecutableCase kThroughExecutableCases[] = {
    {R"("pre_tokenizer": {"type": "Metaspace", "replacement": "\u0000",
                          "prepend_scheme": "always", "split": true})",
     "[]"},
    {R"("normalizer": {"type": "Replace", "pattern": {"String": "a\u0000"}, "content": "b"})",
     "[]"},
    {R"("normalizer": {"type": "Replace", "pattern": {"String": "a"}, "content": "b\u0000"})",
     "[]"},
    {R"("decoder": {"type": "Replace", "pattern": {"String": "a\u0000"}, "content": "x"})", "[]"},
    {R"("decoder": null)", R"([["a", " "], ["a ", "b"]])"},
};

TEST(HfTokenizerThroughExecutable, EncodesAndDecodesAsTheFileDoes) {
  for (const ThroughExecutableCase& test_case : kThroughExecutableCases) {
    SCOPED_TRACE(test_case.step);
    const std::string json_text = absl::StrCat(
        "{", test_case.step, R"(, "model": {"type": "BPE", "unk_token": "<unk>", )",
        kCharacterBpeVocab, R"(, "merges": )", test_case.merges, "}}");
    absl::StatusOr<hf::BpeTokenizerJson> json = hf::ParseBpeTokenizerJson(json_text);
    ASSERT_TRUE(json.ok()) << json.status();
    absl::StatusOr<Vocabulary> vocabulary =
        VocabularyFromHfTokenizerJson(*json, "tokenizer.json");
    ASSERT_TRUE(vocabulary.ok()) << vocabulary.status();
    absl::StatusOr<std::unique_ptr<Tokenizer>> direct = CreateTokenizer(*vocabulary);
    ASSERT_TRUE(direct.ok()) << direct.status();
    absl::StatusOr<std::unique_ptr<Tokenizer>> carried = TokenizerThroughExecutable(*vocabulary);
    ASSERT_TRUE(carried.ok()) << carried.status();
    using namespace std::string_literals;
    for (const std::string& text : {"a b"s, "ab a"s, "b a\0a"s, "a\0 b\0"s}) {
      absl::StatusOr<std::vector<int32_t>> expected = (*direct)->Encode(text, false, false);
      absl::StatusOr<std::vector<int32_t>> ids = (*carried)->Encode(text, false, false);
      ASSERT_TRUE(expected.ok()) << expected.status();
      ASSERT_TRUE(ids.ok()) << ids.status();
      EXPECT_EQ(*ids, *expected) << "text \"" << text << "\"";
      EXPECT_EQ((*carried)->Decode(*ids), (*direct)->Decode(*ids)) << "text \"" << text << "\"";
    }
  }
}

}  // namespace
}  // namespace kvjit::tokenizer
