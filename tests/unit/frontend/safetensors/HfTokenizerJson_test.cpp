#include "frontend/safetensors/HfTokenizerJson.h"

#include <ostream>
#include <string>
#include <utility>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/unit/frontend/safetensors/SafetensorsTestFiles.h"

namespace kvjit::hf {
namespace {

using ::kvjit::safetensors::testing::ErrorMessage;
using ::kvjit::safetensors::testing::TempDir;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

// A byte-level BPE tokenizer.json in the shape Llama 3 and Qwen2 use.
constexpr char kTokenizerJson[] = R"({
  "version": "1.0",
  "added_tokens": [
    {"id": 7, "content": "<|begin_of_text|>", "single_word": false, "lstrip": false,
     "rstrip": false, "normalized": false, "special": true},
    {"id": 8, "content": "<|tool|>", "special": false}
  ],
  "normalizer": null,
  "pre_tokenizer": {
    "type": "Sequence",
    "pretokenizers": [
      {"type": "Split", "pattern": {"Regex": "\\p{L}+|\\s+"}, "behavior": "Isolated",
       "invert": false},
      {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false}
    ]
  },
  "model": {
    "type": "BPE", "dropout": null, "unk_token": null, "byte_fallback": false,
    "vocab": {"a": 0, "b": 1, "c": 2, "ab": 3, "abc": 4, "Ġ": 5, "Ġa": 6},
    "merges": ["a b", ["ab", "c"], "Ġ a"]
  }
})";

TEST(HfTokenizerJsonTest, ParsesBpeModelAddedTokensAndPreTokenizer) {
  absl::StatusOr<BpeTokenizerJson> tokenizer = ParseBpeTokenizerJson(kTokenizerJson);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  EXPECT_EQ(tokenizer->vocab.size(), 7u);
  EXPECT_EQ(tokenizer->vocab.at("abc"), 4);
  EXPECT_EQ(tokenizer->vocab.at("Ġa"), 6);
  EXPECT_THAT(tokenizer->merges, ElementsAre(Pair("a", "b"), Pair("ab", "c"), Pair("Ġ", "a")));
  ASSERT_EQ(tokenizer->added_tokens.size(), 2u);
  EXPECT_EQ(tokenizer->added_tokens[0].id, 7);
  EXPECT_EQ(tokenizer->added_tokens[0].content, "<|begin_of_text|>");
  EXPECT_TRUE(tokenizer->added_tokens[0].special);
  EXPECT_FALSE(tokenizer->added_tokens[1].special);
  EXPECT_THAT(tokenizer->split_patterns, ElementsAre("\\p{L}+|\\s+"));
  EXPECT_TRUE(tokenizer->byte_level);
  EXPECT_FALSE(tokenizer->byte_level_uses_regex);
  EXPECT_FALSE(tokenizer->byte_fallback);
}

TEST(HfTokenizerJsonTest, ByteLevelAloneUsesGpt2Regex) {
  nlohmann::json json = nlohmann::json::parse(kTokenizerJson);
  json["pre_tokenizer"] = {{"type", "ByteLevel"}, {"add_prefix_space", false}};
  absl::StatusOr<BpeTokenizerJson> tokenizer = ParseBpeTokenizerJson(json.dump());
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  EXPECT_TRUE(tokenizer->byte_level);
  EXPECT_TRUE(tokenizer->byte_level_uses_regex);
  EXPECT_TRUE(tokenizer->split_patterns.empty());
}

TEST(HfTokenizerJsonTest, LoadsFromDirectory) {
  TempDir dir;
  dir.WriteFile("tokenizer.json", kTokenizerJson);
  absl::StatusOr<BpeTokenizerJson> tokenizer = LoadBpeTokenizerJson(dir.path());
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  EXPECT_EQ(tokenizer->merges.size(), 3u);
  EXPECT_EQ(LoadBpeTokenizerJson(dir.path() + "/absent").status().code(),
            absl::StatusCode::kNotFound);
}

TEST(HfTokenizerJsonTest, RefusesSequencesNestedTooDeep) {
  nlohmann::json json = nlohmann::json::parse(kTokenizerJson);
  nlohmann::json step = {{"type", "ByteLevel"}};
  for (int depth = 0; depth < 100; ++depth) {
    step = {{"type", "Sequence"}, {"pretokenizers", nlohmann::json::array({step})}};
  }
  json["pre_tokenizer"] = step;
  EXPECT_THAT(ErrorMessage(ParseBpeTokenizerJson(json.dump())),
              HasSubstr("Sequence steps nest more than 8 deep"));
}

// A JSON merge patch over kTokenizerJson, and the words the error must contain.
struct BadTokenizerCase {
  std::string test_name;
  std::string patch;
  std::string expected_message;
};

// Names the case in failure output instead of dumping its bytes.
void PrintTo(const BadTokenizerCase& test_case, std::ostream* out) { *out << test_case.test_name; }

class BadTokenizerJsonTest : public ::testing::TestWithParam<BadTokenizerCase> {};

TEST_P(BadTokenizerJsonTest, IsRefusedWithMessage) {
  nlohmann::json json = nlohmann::json::parse(kTokenizerJson);
  json.merge_patch(nlohmann::json::parse(GetParam().patch));
  EXPECT_THAT(ErrorMessage(ParseBpeTokenizerJson(json.dump())),
              HasSubstr("tokenizer.json: " + GetParam().expected_message));
}

INSTANTIATE_TEST_SUITE_P(
    AllCases, BadTokenizerJsonTest,
    ::testing::Values(
        BadTokenizerCase{"NoModel", R"({"model": null})", "missing object field 'model'"},
        BadTokenizerCase{"Unigram", R"({"model": {"type": "Unigram"}})",
                         "model.type must be \"BPE\", got \"Unigram\""},
        BadTokenizerCase{"NoVocab", R"({"model": {"vocab": null}})",
                         "model.vocab must be an object"},
        BadTokenizerCase{"NegativeId", R"({"model": {"vocab": {"a": -1}}})",
                         "model.vocab['a'] must be a non-negative integer"},
        BadTokenizerCase{"DuplicateId", R"({"model": {"vocab": {"b": 0}}})",
                         "model.vocab gives id 0 to both"},
        BadTokenizerCase{"MergeWithoutSpace", R"({"model": {"merges": ["ab"]}})",
                         "model.merges[0] 'ab' must be two pieces separated by one space"},
        BadTokenizerCase{"MergeOfThree", R"({"model": {"merges": [["a", "b", "c"]]}})",
                         "model.merges[0] must be \"left right\" or [\"left\", \"right\"]"},
        BadTokenizerCase{"MergeOutOfVocab", R"({"model": {"merges": ["a c"]}})",
                         "model.merges[0] uses 'ac', which is not in the vocab"},
        BadTokenizerCase{"AddedTokenWithoutId", R"({"added_tokens": [{"content": "x"}]})",
                         "added_tokens[0] must be an object with an integer id"},
        BadTokenizerCase{"AddedTokenClashesWithVocab",
                         R"({"added_tokens": [{"id": 0, "content": "<s>"}]})",
                         "added_tokens[0] gives id 0 to '<s>', which the vocab gives to 'a'"},
        BadTokenizerCase{"StringSplitPattern",
                         R"({"pre_tokenizer": {"type": "Split", "pattern": {"String": " "}}})",
                         "pre_tokenizer.pattern: only {\"Regex\": \"...\"} patterns are supported"},
        BadTokenizerCase{"RemovedSplit",
                         R"({"pre_tokenizer": {"type": "Split", "pattern": {"Regex": "a"},
                             "behavior": "Removed"}})",
                         "pre_tokenizer: only behavior \"Isolated\" without invert is supported"},
        BadTokenizerCase{"Metaspace", R"({"pre_tokenizer": {"type": "Metaspace"}})",
                         "pre_tokenizer: pre-tokenizer type 'Metaspace' is not supported"}),
    [](const ::testing::TestParamInfo<BadTokenizerCase>& info) { return info.param.test_name; });

}  // namespace
}  // namespace kvjit::hf
