#include "frontend/tokenizer/HfVocabulary.h"

#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "frontend/gguf/GgufFile.h"
#include "frontend/huggingface/HfTokenizerJson.h"
#include "frontend/tokenizer/GgufVocabulary.h"
#include "runtime/tokenizer/WordSplitter.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/unit/frontend/huggingface/SafetensorsTestFiles.h"
#include "tests/unit/frontend/tokenizer/ConformanceCases.h"
#include "tests/unit/frontend/tokenizer/TokenizerJsonOf.h"

namespace kvjit::tokenizer {
namespace {

using ::kvjit::safetensors::testing::ErrorMessage;
using ::kvjit::safetensors::testing::TempDir;
using ::kvjit::tokenizer::testing::ConformanceCase;
using ::kvjit::tokenizer::testing::ReadConformanceCases;
using ::kvjit::tokenizer::testing::ReadFile;
using ::kvjit::tokenizer::testing::TokenizerDataPath;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

// A byte-level BPE tokenizer.json with GPT-2's pre-tokenizer, written as
// GPT-2's own file writes it (ByteLevel without use_regex, which defaults to
// true).
constexpr char kTokenizerJson[] = R"({
  "version": "1.0",
  "added_tokens": [
    {"id": 7, "content": "<|begin_of_text|>", "single_word": false, "lstrip": false,
     "rstrip": false, "normalized": false, "special": true},
    {"id": 8, "content": "<|tool|>", "special": false},
    {"id": 9, "content": "<|end|>", "special": true}
  ],
  "normalizer": null,
  "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true},
  "model": {
    "type": "BPE", "dropout": null, "unk_token": null,
    "vocab": {"a": 0, "b": 1, "c": 2, "ab": 3, "abc": 4, "Ġ": 5, "Ġa": 6},
    "merges": ["a b", ["ab", "c"], "Ġ a"]
  }
})";

// The pre_tokenizer sections of the tokenizer.json files of these models, as
// they write them.
constexpr char kLlama3PreTokenizer[] =
    R"({"type": "Sequence", "pretokenizers": [
  {"type": "Split", "pattern": {"Regex": "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
   "behavior": "Isolated", "invert": false},
  {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false}]})";
constexpr char kQwen2PreTokenizer[] = R"({"type": "Sequence", "pretokenizers": [
  {"type": "Split", "pattern": {"Regex": "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
   "behavior": "Isolated", "invert": false},
  {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false}]})";
constexpr char kSmolLmPreTokenizer[] =
    R"({"type": "Sequence", "pretokenizers": [
  {"type": "Split", "pattern": {"Regex": "\\p{N}"}, "behavior": "Isolated", "invert": false},
  {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true}]})";

// kTokenizerJson with `patch` merged over it (RFC 7386).
nlohmann::json PatchedTokenizerJson(const std::string& patch) {
  nlohmann::json json = nlohmann::json::parse(kTokenizerJson);
  json.merge_patch(nlohmann::json::parse(patch));
  return json;
}

absl::StatusOr<Vocabulary> VocabularyOf(const nlohmann::json& json) {
  absl::StatusOr<hf::BpeTokenizerJson> parsed =
      hf::ParseBpeTokenizerJson(json.dump(), "tokenizer.json");
  if (!parsed.ok()) return parsed.status();
  return VocabularyFromHfTokenizerJson(*parsed, "tokenizer.json");
}

absl::StatusOr<Vocabulary> VocabularyWithPreTokenizer(
    const std::string& pre_tokenizer) {
  nlohmann::json json = nlohmann::json::parse(kTokenizerJson);
  json["pre_tokenizer"] = nlohmann::json::parse(pre_tokenizer);
  return VocabularyOf(json);
}

TEST(VocabularyFromHfTokenizerJson, LaysOutVocabAndAddedTokensById) {
  absl::StatusOr<Vocabulary> vocabulary =
      VocabularyOf(nlohmann::json::parse(kTokenizerJson));
  ASSERT_TRUE(vocabulary.ok()) << vocabulary.status();
  EXPECT_EQ(vocabulary->model, TokenizerModel::kByteLevelBpe);
  EXPECT_EQ(vocabulary->pre_tokenizer, PreTokenizer::kGpt2);
  EXPECT_THAT(vocabulary->tokens,
              ElementsAre("a", "b", "c", "ab", "abc", "Ġ", "Ġa",
                          "<|begin_of_text|>", "<|tool|>", "<|end|>"));
  std::vector<TokenType> expected_types(7, TokenType::kNormal);
  expected_types.insert(
      expected_types.end(),
      {TokenType::kControl, TokenType::kUserDefined, TokenType::kControl});
  EXPECT_EQ(vocabulary->token_types, expected_types);
  EXPECT_THAT(vocabulary->merges,
              ElementsAre(Pair("a", "b"), Pair("ab", "c"), Pair("Ġ", "a")));
  EXPECT_EQ(vocabulary->bos_id, kNoToken);
  EXPECT_EQ(vocabulary->eos_id, kNoToken);
  EXPECT_FALSE(vocabulary->add_bos_token);
}

TEST(VocabularyFromHfTokenizerJson, AddedTokenAlsoInVocabTakesItsType) {
  absl::StatusOr<Vocabulary> vocabulary = VocabularyOf(PatchedTokenizerJson(
      R"({"added_tokens": [{"id": 6, "content": "Ġa", "special": true}]})"));
  ASSERT_TRUE(vocabulary.ok()) << vocabulary.status();
  ASSERT_EQ(vocabulary->tokens.size(), 7u);
  EXPECT_EQ(vocabulary->token_types[6], TokenType::kControl);
}

struct PreTokenizerCase {
  std::string test_name;
  std::string pre_tokenizer_json;
  PreTokenizer expected;
};

// Names the case in failure output instead of dumping its bytes.
void PrintTo(const PreTokenizerCase& test_case, std::ostream* out) {
  *out << test_case.test_name;
}

class PreTokenizerMappingTest
    : public ::testing::TestWithParam<PreTokenizerCase> {};

TEST_P(PreTokenizerMappingTest, MatchesTheWordSplitterPatterns) {
  absl::StatusOr<Vocabulary> vocabulary =
      VocabularyWithPreTokenizer(GetParam().pre_tokenizer_json);
  ASSERT_TRUE(vocabulary.ok()) << vocabulary.status();
  EXPECT_EQ(vocabulary->pre_tokenizer, GetParam().expected);
}

INSTANTIATE_TEST_SUITE_P(
    ModelFiles, PreTokenizerMappingTest,
    ::testing::Values(
        PreTokenizerCase{"Gpt2",
                         R"({"type": "ByteLevel", "add_prefix_space": false})",
                         PreTokenizer::kGpt2},
        PreTokenizerCase{"Llama3", kLlama3PreTokenizer, PreTokenizer::kLlama3},
        PreTokenizerCase{"SmolLm", kSmolLmPreTokenizer, PreTokenizer::kSmolLm},
        PreTokenizerCase{"Qwen2", kQwen2PreTokenizer, PreTokenizer::kQwen2}),
    [](const ::testing::TestParamInfo<PreTokenizerCase>& info) {
      return info.param.test_name;
    });

TEST(VocabularyFromHfTokenizerJson, SmolLm2DigitsStepIsSmolLmPreTokenizer) {
  absl::StatusOr<Vocabulary> vocabulary =
      VocabularyWithPreTokenizer(R"({"type": "Sequence", "pretokenizers": [
        {"type": "Digits", "individual_digits": true},
        {"type": "ByteLevel", "add_prefix_space": false, "use_regex": true}]})");
  ASSERT_TRUE(vocabulary.ok()) << vocabulary.status();
  EXPECT_EQ(vocabulary->pre_tokenizer, PreTokenizer::kSmolLm);
  EXPECT_FALSE(vocabulary->split_rules.has_value());
}

TEST(VocabularyFromHfTokenizerJson, OtherPatternsBecomeSplitRules) {
  absl::StatusOr<Vocabulary> vocabulary =
      VocabularyWithPreTokenizer(R"({"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"String": "x"}, "behavior": "Removed"},
        {"type": "Digits", "individual_digits": false},
        {"type": "ByteLevel", "use_regex": true}]})");
  ASSERT_TRUE(vocabulary.ok()) << vocabulary.status();
  ASSERT_TRUE(vocabulary->split_rules.has_value());
  EXPECT_THAT(
      *vocabulary->split_rules,
      ElementsAre(SplitRule{"x", true, SplitBehavior::kRemoved, false},
                  SplitRule{R"(\p{N}+)"},
                  SplitRule{std::string(Gpt2Pattern())}));
}

TEST(VocabularyFromHfTokenizerJson, RefusesStepsAfterByteLevel) {
  absl::StatusOr<Vocabulary> vocabulary =
      VocabularyWithPreTokenizer(R"({"type": "Sequence", "pretokenizers": [
        {"type": "ByteLevel", "use_regex": false},
        {"type": "Digits"}]})");
  EXPECT_EQ(vocabulary.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(ErrorMessage(vocabulary),
              HasSubstr("tokenizer.json: pre_tokenizer.pretokenizers[1]: steps "
                        "after ByteLevel would cut text already in the byte "
                        "alphabet"));
}

TEST(VocabularyFromHfTokenizerJson, CarriesNormalizersAndIgnoreMerges) {
  absl::StatusOr<Vocabulary> vocabulary = VocabularyOf(PatchedTokenizerJson(
      R"({"normalizer": {"type": "Sequence", "normalizers": [
            {"type": "NFKC"}, {"type": "Lowercase"}]},
          "model": {"ignore_merges": true}})"));
  ASSERT_TRUE(vocabulary.ok()) << vocabulary.status();
  ASSERT_EQ(vocabulary->normalizer.size(), 2u);
  EXPECT_EQ(vocabulary->normalizer[0].kind, NormalizerKind::kNfkc);
  EXPECT_EQ(vocabulary->normalizer[1].kind, NormalizerKind::kLowercase);
  EXPECT_TRUE(vocabulary->ignore_merges);
}

TEST(VocabularyFromHfTokenizerJson, MakesCharacterBpeOfATokenizerWithoutByteLevel) {
  absl::StatusOr<Vocabulary> vocabulary = VocabularyWithPreTokenizer(
      R"({"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": "\\s+"}},
            {"type": "Metaspace", "replacement": "_", "prepend_scheme": "never",
             "split": false}]})");
  ASSERT_TRUE(vocabulary.ok()) << vocabulary.status();
  EXPECT_EQ(vocabulary->model, TokenizerModel::kCharacterBpe);
  ASSERT_TRUE(vocabulary->split_rules.has_value());
  EXPECT_THAT(*vocabulary->split_rules, ElementsAre(SplitRule{"\\s+"}));
  ASSERT_TRUE(vocabulary->metaspace.has_value());
  EXPECT_EQ(vocabulary->metaspace->replacement, "_");
  EXPECT_EQ(vocabulary->metaspace->prepend_scheme, PrependScheme::kNever);
  EXPECT_FALSE(vocabulary->metaspace->split);
}

TEST(VocabularyFromHfTokenizerJson, RefusesStepsAfterMetaspace) {
  absl::StatusOr<Vocabulary> vocabulary = VocabularyWithPreTokenizer(
      R"({"type": "Sequence", "pretokenizers": [
            {"type": "Metaspace", "replacement": "_"}, {"type": "Digits"}]})");
  EXPECT_EQ(vocabulary.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(ErrorMessage(vocabulary),
              HasSubstr("tokenizer.json: pre_tokenizer.pretokenizers[1]: steps after "
                        "Metaspace are not supported"));
}

TEST(VocabularyFromHfTokenizerJson, RefusesAByteLevelDecoderWithoutAByteLevelPreTokenizer) {
  absl::StatusOr<Vocabulary> vocabulary = VocabularyOf(PatchedTokenizerJson(
      R"({"pre_tokenizer": null, "decoder": {"type": "ByteLevel"}})"));
  EXPECT_EQ(vocabulary.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(ErrorMessage(vocabulary),
              HasSubstr("tokenizer.json: decoder: a ByteLevel decoder needs a ByteLevel "
                        "pre-tokenizer"));
}

TEST(VocabularyFromHfTokenizerJson, TakesBosAndEosFromTheTemplate) {
  absl::StatusOr<Vocabulary> vocabulary = VocabularyOf(PatchedTokenizerJson(
      R"({"post_processor": {"type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}},
                       {"Sequence": {"id": "A", "type_id": 0}},
                       {"SpecialToken": {"id": "<|end|>", "type_id": 0}}],
            "special_tokens": {
              "<|begin_of_text|>": {"id": "<|begin_of_text|>", "ids": [7],
                                    "tokens": ["<|begin_of_text|>"]},
              "<|end|>": {"id": "<|end|>", "ids": [9], "tokens": ["<|end|>"]}}}})"));
  ASSERT_TRUE(vocabulary.ok()) << vocabulary.status();
  EXPECT_EQ(vocabulary->bos_id, 7);
  EXPECT_TRUE(vocabulary->add_bos_token);
  EXPECT_EQ(vocabulary->eos_id, 9);
  EXPECT_TRUE(vocabulary->add_eos_token);
}

TEST(VocabularyFromHfTokenizerJson, RefusesATemplateOfTwoTokensBeforeTheText) {
  absl::StatusOr<Vocabulary> vocabulary = VocabularyOf(PatchedTokenizerJson(
      R"({"post_processor": {"type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}},
                       {"Sequence": {"id": "A", "type_id": 0}}],
            "special_tokens": {"<|begin_of_text|>": {"id": "<|begin_of_text|>", "ids": [7, 9],
                                                     "tokens": ["<|begin_of_text|>", "<|end|>"]}}}})"));
  EXPECT_EQ(vocabulary.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(ErrorMessage(vocabulary),
              HasSubstr("tokenizer.json: post_processor: TemplateProcessing puts 2 tokens "
                        "before the text"));
}

// An id past 32 bits once wrapped onto a token (4294967297 became 1).
TEST(VocabularyFromHfTokenizerJson, RefusesATemplateTokenOutsideTheVocabulary) {
  absl::StatusOr<Vocabulary> vocabulary = VocabularyOf(PatchedTokenizerJson(
      R"({"post_processor": {"type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}},
                       {"Sequence": {"id": "A", "type_id": 0}}],
            "special_tokens": {"<|begin_of_text|>": {"id": "<|begin_of_text|>",
                                                     "ids": [4294967297],
                                                     "tokens": ["<|begin_of_text|>"]}}}})"));
  EXPECT_EQ(vocabulary.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(ErrorMessage(vocabulary),
              HasSubstr("tokenizer.json: post_processor: TemplateProcessing puts token id "
                        "4294967297 before the text, outside the vocabulary of 10 tokens"));
}

TEST(VocabularyFromHfTokenizerJson, NamesTheMissingIdOfAHole) {
  absl::StatusOr<Vocabulary> vocabulary = VocabularyOf(PatchedTokenizerJson(
      R"({"added_tokens": [{"id": 12, "content": "<x>"}]})"));
  EXPECT_EQ(vocabulary.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(ErrorMessage(vocabulary),
              HasSubstr("tokenizer.json: model.vocab and added_tokens hold 8 "
                        "ids, which must be 0 to 7, but no token has id 7"));
}

TEST(VocabularyFromHfTokenizerJson, RefusesTwoAddedTokensWithOneId) {
  absl::StatusOr<Vocabulary> vocabulary = VocabularyOf(PatchedTokenizerJson(
      R"({"added_tokens": [{"id": 7, "content": "<x>"}, {"id": 7, "content": "<y>"}]})"));
  EXPECT_THAT(ErrorMessage(vocabulary),
              HasSubstr("tokenizer.json: added_tokens give id 7 to '<y>', "
                        "which already belongs to '<x>'"));
}

TEST(VocabularyFromHfTokenizerJson, RefusesAVocabularyWithoutMerges) {
  absl::StatusOr<Vocabulary> vocabulary =
      VocabularyOf(PatchedTokenizerJson(R"({"model": {"merges": []}})"));
  EXPECT_THAT(ErrorMessage(vocabulary),
              HasSubstr("tokenizer.json: tokenizer: a byte-level BPE "
                        "vocabulary needs merges"));
}

class LoadTokenizerFromHfDirectoryTest : public ::testing::Test {
 protected:
  absl::StatusOr<std::unique_ptr<Tokenizer>> Load(
      const std::string& tokenizer_config) {
    directory_.WriteFile("tokenizer.json", tokenizer_json_.dump());
    directory_.WriteFile("tokenizer_config.json", tokenizer_config);
    return LoadTokenizerFromHfDirectory(directory_.path());
  }

  TempDir directory_;
  nlohmann::json tokenizer_json_ = nlohmann::json::parse(kTokenizerJson);
};

TEST_F(LoadTokenizerFromHfDirectoryTest, ReadsSpecialTokensFromConfig) {
  auto tokenizer = Load(R"({
    "add_bos_token": true,
    "bos_token": "<|begin_of_text|>",
    "eos_token": {"__type": "AddedToken", "content": "<|end|>", "special": true},
    "model_max_length": 1000000000000000019884624838656
  })");
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  EXPECT_EQ((*tokenizer)->bos_id(), 7);
  EXPECT_EQ((*tokenizer)->eos_id(), 9);
  EXPECT_TRUE((*tokenizer)->IsEndOfGeneration(9));
  auto ids = (*tokenizer)
                 ->Encode("abc ab", /*add_special=*/true,
                          /*parse_special=*/false);
  ASSERT_TRUE(ids.ok()) << ids.status();
  EXPECT_THAT(*ids, ElementsAre(7, 4, 5, 3));
  EXPECT_EQ((*tokenizer)->Decode(*ids), "abc ab");
}

TEST_F(LoadTokenizerFromHfDirectoryTest, ParsesControlTokensOnlyWhenAsked) {
  auto tokenizer = Load("{}");
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  auto user_defined = (*tokenizer)
                          ->Encode("<|tool|>ab", false,
                                   /*parse_special=*/false);
  ASSERT_TRUE(user_defined.ok()) << user_defined.status();
  EXPECT_THAT(*user_defined, ElementsAre(8, 3));
  auto control = (*tokenizer)
                     ->Encode("<|end|>ab", false,
                              /*parse_special=*/true);
  ASSERT_TRUE(control.ok()) << control.status();
  EXPECT_THAT(*control, ElementsAre(9, 3));
  // Taken literally, "<" is a character this vocabulary lacks.
  EXPECT_FALSE(
      (*tokenizer)->Encode("<|end|>", false, /*parse_special=*/false).ok());
}

TEST_F(LoadTokenizerFromHfDirectoryTest, AddsNoBosUnlessAsked) {
  auto tokenizer = Load(R"({"bos_token": "<|begin_of_text|>"})");
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  EXPECT_EQ((*tokenizer)->bos_id(), 7);
  EXPECT_FALSE((*tokenizer)->vocabulary().add_bos_token);
}

TEST_F(LoadTokenizerFromHfDirectoryTest, Llama3AddsBosByDefault) {
  tokenizer_json_["pre_tokenizer"] = nlohmann::json::parse(kLlama3PreTokenizer);
  auto tokenizer = Load(R"({"bos_token": "<|begin_of_text|>"})");
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  EXPECT_TRUE((*tokenizer)->vocabulary().add_bos_token);
  auto explicitly_off =
      Load(R"({"bos_token": "<|begin_of_text|>", "add_bos_token": false})");
  ASSERT_TRUE(explicitly_off.ok()) << explicitly_off.status();
  EXPECT_FALSE((*explicitly_off)->vocabulary().add_bos_token);
}

TEST(LoadTokenizerFromHfDirectory, WorksWithoutConfig) {
  TempDir directory;
  directory.WriteFile("tokenizer.json", kTokenizerJson);
  auto tokenizer = LoadTokenizerFromHfDirectory(directory.path());
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  EXPECT_EQ((*tokenizer)->bos_id(), kNoToken);
  EXPECT_EQ((*tokenizer)->eos_id(), kNoToken);
  EXPECT_FALSE((*tokenizer)->vocabulary().add_bos_token);
  // <|end|> is a control token with an end-of-turn name.
  EXPECT_TRUE((*tokenizer)->IsEndOfGeneration(9));
}

TEST(LoadTokenizerFromHfDirectory, NeedsTokenizerJson) {
  TempDir directory;
  EXPECT_EQ(LoadTokenizerFromHfDirectory(directory.path()).status().code(),
            absl::StatusCode::kNotFound);
}

struct BadConfigCase {
  std::string test_name;
  std::string config;
  std::string expected_message;
};

void PrintTo(const BadConfigCase& test_case, std::ostream* out) {
  *out << test_case.test_name;
}

class BadTokenizerConfigTest : public ::testing::TestWithParam<BadConfigCase> {
};

TEST_P(BadTokenizerConfigTest, IsRefusedWithMessage) {
  TempDir directory;
  directory.WriteFile("tokenizer.json", kTokenizerJson);
  directory.WriteFile("tokenizer_config.json", GetParam().config);
  EXPECT_THAT(
      ErrorMessage(LoadTokenizerFromHfDirectory(directory.path())),
      HasSubstr("tokenizer_config.json: " + GetParam().expected_message));
}

INSTANTIATE_TEST_SUITE_P(
    AllCases, BadTokenizerConfigTest,
    ::testing::Values(
        BadConfigCase{"NotJson", "{", "invalid JSON"},
        BadConfigCase{"NotAnObject", "[]", "must be an object, got a list"},
        BadConfigCase{"UnknownBos", R"({"bos_token": "<s>"})",
                      "bos_token '<s>' is not a token of tokenizer.json"},
        BadConfigCase{"NumericEos", R"({"eos_token": 9})",
                      "eos_token must be a string, an object with a string "
                      "content, or null; got 9"},
        BadConfigCase{"EosWithoutContent",
                      R"({"eos_token": {"special": true}})",
                      "eos_token must be a string, an object with a string "
                      "content, or null; got an object"},
        BadConfigCase{"AddBosNotBool", R"({"add_bos_token": "yes"})",
                      "add_bos_token must be true or false, got \"yes\""},
        BadConfigCase{"AddBosWithoutBos", R"({"add_bos_token": true})",
                      "tokenizer: add_bos_token is set but there is no BOS "
                      "token"}),
    [](const ::testing::TestParamInfo<BadConfigCase>& info) {
      return info.param.test_name;
    });

TEST(HfVocabularyConformance, MirrorOfGpt2GgufEncodesAsLlamaCppDoes) {
  const std::string gguf_path = TokenizerDataPath("ggml-vocab-gpt-2.gguf");
  std::string inputs;
  std::string outputs;
  if (!ReadFile(gguf_path + ".inp", &inputs) ||
      !ReadFile(gguf_path + ".out", &outputs)) {
    GTEST_SKIP() << "tokenizer conformance files are absent beside "
                 << gguf_path << " (set KVJIT_SHARED_DIR to the shared folder)";
  }
  auto file = gguf::GgufFile::Open(gguf_path);
  ASSERT_TRUE(file.ok()) << file.status();
  absl::StatusOr<Vocabulary> gguf_vocabulary = ReadVocabularyFromGguf(**file);
  ASSERT_TRUE(gguf_vocabulary.ok()) << gguf_vocabulary.status();

  TempDir directory;
  directory.WriteFile("tokenizer.json",
                      TokenizerJsonOf(*gguf_vocabulary,
                                      {{"type", "ByteLevel"}, {"add_prefix_space", false}}));
  auto tokenizer = LoadTokenizerFromHfDirectory(directory.path());
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  const Vocabulary& vocabulary = (*tokenizer)->vocabulary();
  EXPECT_EQ(vocabulary.pre_tokenizer, gguf_vocabulary->pre_tokenizer);
  EXPECT_EQ(vocabulary.tokens, gguf_vocabulary->tokens);
  EXPECT_EQ(vocabulary.token_types, gguf_vocabulary->token_types);
  EXPECT_EQ(vocabulary.merges, gguf_vocabulary->merges);

  const std::vector<ConformanceCase> cases =
      ReadConformanceCases(inputs, outputs);
  ASSERT_FALSE(cases.empty());
  for (const ConformanceCase& test_case : cases) {
    auto ids = (*tokenizer)
                   ->Encode(test_case.text, /*add_special=*/false,
                            /*parse_special=*/false);
    ASSERT_TRUE(ids.ok()) << ids.status();
    EXPECT_EQ(*ids, test_case.expected_ids)
        << "text \"" << test_case.text
        << "\"\n  expected: " << absl::StrJoin(test_case.expected_ids, " ")
        << "\n  got:      " << absl::StrJoin(*ids, " ");
  }
}

}  // namespace
}  // namespace kvjit::tokenizer
