#include "frontend/huggingface/HfTokenizerJson.h"

#include <ostream>
#include <string>
#include <utility>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/unit/frontend/huggingface/SafetensorsTestFiles.h"

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
  ASSERT_EQ(tokenizer->pre_tokenizer_steps.size(), 2u);
  const PreTokenizerStep& split = tokenizer->pre_tokenizer_steps[0];
  EXPECT_EQ(split.kind, PreTokenizerStep::Kind::kSplit);
  EXPECT_EQ(split.where, "tokenizer.json: pre_tokenizer.pretokenizers[0]");
  EXPECT_EQ(split.pattern, "\\p{L}+|\\s+");
  EXPECT_FALSE(split.pattern_is_literal);
  EXPECT_EQ(split.behavior, SplitBehavior::kIsolated);
  EXPECT_FALSE(split.invert);
  EXPECT_EQ(tokenizer->pre_tokenizer_steps[1].kind, PreTokenizerStep::Kind::kByteLevel);
  EXPECT_FALSE(tokenizer->pre_tokenizer_steps[1].use_regex);
  EXPECT_TRUE(tokenizer->normalizers.empty());
  EXPECT_FALSE(tokenizer->byte_fallback);
  EXPECT_FALSE(tokenizer->ignore_merges);
}

// SmolLM2's pre-tokenizer, and the Split and normalizer forms Hugging Face
// writes.
TEST(HfTokenizerJsonTest, ParsesDigitsSplitVariantsAndNormalizers) {
  nlohmann::json json = nlohmann::json::parse(kTokenizerJson);
  json["pre_tokenizer"] = nlohmann::json::parse(R"({"type": "Sequence", "pretokenizers": [
    {"type": "Digits", "individual_digits": true},
    {"type": "Split", "pattern": {"String": ";"}, "behavior": "MergedWithNext", "invert": true},
    {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true}]})");
  json["normalizer"] = nlohmann::json::parse(R"({"type": "Sequence", "normalizers": [
    {"type": "NFC"}, {"type": "Sequence", "normalizers": [{"type": "NFKD"}]},
    {"type": "Lowercase"}]})");
  json["model"]["ignore_merges"] = true;
  absl::StatusOr<BpeTokenizerJson> tokenizer = ParseBpeTokenizerJson(json.dump());
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  ASSERT_EQ(tokenizer->pre_tokenizer_steps.size(), 3u);
  EXPECT_EQ(tokenizer->pre_tokenizer_steps[0].kind, PreTokenizerStep::Kind::kDigits);
  EXPECT_TRUE(tokenizer->pre_tokenizer_steps[0].individual_digits);
  const PreTokenizerStep& split = tokenizer->pre_tokenizer_steps[1];
  EXPECT_EQ(split.pattern, ";");
  EXPECT_TRUE(split.pattern_is_literal);
  EXPECT_EQ(split.behavior, SplitBehavior::kMergedWithNext);
  EXPECT_TRUE(split.invert);
  EXPECT_TRUE(tokenizer->pre_tokenizer_steps[2].use_regex);
  ASSERT_EQ(tokenizer->normalizers.size(), 3u);
  EXPECT_EQ(tokenizer->normalizers[0].kind, tokenizer::NormalizerKind::kNfc);
  EXPECT_EQ(tokenizer->normalizers[1].kind, tokenizer::NormalizerKind::kNfkd);
  EXPECT_EQ(tokenizer->normalizers[2].kind, tokenizer::NormalizerKind::kLowercase);
  EXPECT_TRUE(tokenizer->ignore_merges);
}

// The pipeline transformers' LlamaConverter writes (legacy form), with the
// Metaspace, Strip and regex Replace forms beside it.
TEST(HfTokenizerJsonTest, ParsesTheSentencePiecePipeline) {
  nlohmann::json json = nlohmann::json::parse(kTokenizerJson);
  json["normalizer"] = nlohmann::json::parse(R"({"type": "Sequence", "normalizers": [
    {"type": "Strip", "strip_left": false, "strip_right": true},
    {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "},
    {"type": "Prepend", "prepend": "\u2581"},
    {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]})");
  json["pre_tokenizer"] = nlohmann::json::parse(
      R"({"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first", "split": false})");
  json["decoder"] = nlohmann::json::parse(R"({"type": "Sequence", "decoders": [
    {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
    {"type": "ByteFallback"}, {"type": "Fuse"},
    {"type": "Strip", "content": " ", "start": 1, "stop": 0},
    {"type": "Metaspace", "replacement": "\u2581", "add_prefix_space": false}]})");
  json["post_processor"] = nlohmann::json::parse(R"({"type": "TemplateProcessing",
    "single": [{"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}},
               {"Sequence": {"id": "A", "type_id": 0}}],
    "pair": [],
    "special_tokens": {"<|begin_of_text|>": {"id": "<|begin_of_text|>", "ids": [7],
                                             "tokens": ["<|begin_of_text|>"]}}})");
  json["model"]["byte_fallback"] = true;
  json["model"]["fuse_unk"] = true;
  json["model"]["unk_token"] = "a";
  json["added_tokens"][1] = nlohmann::json::parse(
      R"({"id": 8, "content": "<|tool|>", "lstrip": true, "rstrip": true, "single_word": true,
          "normalized": false, "special": false})");
  absl::StatusOr<BpeTokenizerJson> tokenizer = ParseBpeTokenizerJson(json.dump());
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();

  using tokenizer::DecoderKind;
  using tokenizer::NormalizerKind;
  ASSERT_EQ(tokenizer->normalizers.size(), 4u);
  EXPECT_EQ(tokenizer->normalizers[0].kind, NormalizerKind::kStrip);
  EXPECT_FALSE(tokenizer->normalizers[0].strip_left);
  EXPECT_TRUE(tokenizer->normalizers[0].strip_right);
  EXPECT_EQ(tokenizer->normalizers[1].kind, NormalizerKind::kReplace);
  EXPECT_TRUE(tokenizer->normalizers[1].pattern_is_regex);
  EXPECT_EQ(tokenizer->normalizers[2].kind, NormalizerKind::kPrepend);
  EXPECT_EQ(tokenizer->normalizers[2].content, "\xE2\x96\x81");
  EXPECT_EQ(tokenizer->normalizers[3].pattern, " ");
  EXPECT_FALSE(tokenizer->normalizers[3].pattern_is_regex);

  ASSERT_EQ(tokenizer->pre_tokenizer_steps.size(), 1u);
  const PreTokenizerStep& metaspace = tokenizer->pre_tokenizer_steps[0];
  EXPECT_EQ(metaspace.kind, PreTokenizerStep::Kind::kMetaspace);
  EXPECT_EQ(metaspace.metaspace.prepend_scheme, tokenizer::PrependScheme::kFirst);
  EXPECT_FALSE(metaspace.metaspace.split);

  ASSERT_EQ(tokenizer->decoder_steps.size(), 5u);
  EXPECT_EQ(tokenizer->decoder_steps[0].kind, DecoderKind::kReplace);
  EXPECT_EQ(tokenizer->decoder_steps[0].content, " ");
  EXPECT_EQ(tokenizer->decoder_steps[1].kind, DecoderKind::kByteFallback);
  EXPECT_EQ(tokenizer->decoder_steps[2].kind, DecoderKind::kFuse);
  EXPECT_EQ(tokenizer->decoder_steps[3].kind, DecoderKind::kStrip);
  EXPECT_EQ(tokenizer->decoder_steps[3].strip_start, 1u);
  EXPECT_EQ(tokenizer->decoder_steps[3].strip_stop, 0u);
  EXPECT_EQ(tokenizer->decoder_steps[4].kind, DecoderKind::kMetaspace);
  // add_prefix_space false, as older files write it, prepends never.
  EXPECT_EQ(tokenizer->decoder_steps[4].prepend_scheme, tokenizer::PrependScheme::kNever);

  ASSERT_TRUE(tokenizer->post_processor.has_value());
  EXPECT_THAT(tokenizer->post_processor->prefix_ids, ElementsAre(7));
  EXPECT_TRUE(tokenizer->post_processor->suffix_ids.empty());
  EXPECT_TRUE(tokenizer->byte_fallback);
  EXPECT_TRUE(tokenizer->fuse_unk);
  EXPECT_EQ(tokenizer->unk_token, "a");

  const AddedToken& tool = tokenizer->added_tokens[1];
  EXPECT_TRUE(tool.lstrip && tool.rstrip && tool.single_word);
  EXPECT_FALSE(tool.normalized);
  // Without "normalized", a token that is not special is normalized.
  EXPECT_TRUE(ParseBpeTokenizerJson(kTokenizerJson)->added_tokens[1].normalized);
}

TEST(HfTokenizerJsonTest, ByteLevelAloneUsesGpt2Regex) {
  nlohmann::json json = nlohmann::json::parse(kTokenizerJson);
  json["pre_tokenizer"] = {{"type", "ByteLevel"}, {"add_prefix_space", false}};
  absl::StatusOr<BpeTokenizerJson> tokenizer = ParseBpeTokenizerJson(json.dump());
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  ASSERT_EQ(tokenizer->pre_tokenizer_steps.size(), 1u);
  EXPECT_EQ(tokenizer->pre_tokenizer_steps[0].kind, PreTokenizerStep::Kind::kByteLevel);
  EXPECT_TRUE(tokenizer->pre_tokenizer_steps[0].use_regex);
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
        BadTokenizerCase{"SplitWithoutPattern",
                         R"({"pre_tokenizer": {"type": "Split", "pattern": {"Text": " "}}})",
                         "pre_tokenizer.pattern must be {\"Regex\": \"...\"} or "
                         "{\"String\": \"...\"}"},
        BadTokenizerCase{"UnknownSplitBehavior",
                         R"({"pre_tokenizer": {"type": "Split", "pattern": {"Regex": "a"},
                             "behavior": "Dropped"}})",
                         "pre_tokenizer.behavior must be Isolated, Removed, MergedWithPrevious, "
                         "MergedWithNext or Contiguous, got \"Dropped\""},
        BadTokenizerCase{"InvertNotBool",
                         R"({"pre_tokenizer": {"type": "Split", "pattern": {"Regex": "a"},
                             "invert": 1}})",
                         "pre_tokenizer.invert must be true or false, got 1"},
        BadTokenizerCase{"DigitsFlagNotBool",
                         R"({"pre_tokenizer": {"type": "Digits", "individual_digits": "yes"}})",
                         "pre_tokenizer.individual_digits must be true or false"},
        BadTokenizerCase{"ByteLevelWithPrefixSpace",
                         R"({"pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": true}})",
                         "pre_tokenizer: ByteLevel with add_prefix_space true is not supported"},
        BadTokenizerCase{"MetaspaceWithoutReplacement",
                         R"({"pre_tokenizer": {"type": "Sequence", "pretokenizers": [
                             {"type": "Digits"}, {"type": "Metaspace"}]}})",
                         "pre_tokenizer.pretokenizers[1].replacement must be a string, got "
                         "nothing"},
        BadTokenizerCase{"MetaspaceWithUnknownScheme",
                         R"({"pre_tokenizer": {"type": "Metaspace", "replacement": "_",
                             "prepend_scheme": "sometimes"}})",
                         "pre_tokenizer.prepend_scheme must be first, always or never, got "
                         "\"sometimes\""},
        BadTokenizerCase{"UnknownPreTokenizer",
                         R"({"pre_tokenizer": {"type": "Whitespace"}})",
                         "pre_tokenizer: pre-tokenizer type 'Whitespace' is not supported"},
        BadTokenizerCase{"UnknownDecoder",
                         R"({"decoder": {"type": "Sequence", "decoders": [
                             {"type": "Fuse"}, {"type": "WordPiece"}]}})",
                         "decoder.decoders[1]: decoder type 'WordPiece' is not supported"},
        BadTokenizerCase{"RegexReplaceDecoder",
                         R"({"decoder": {"type": "Replace", "pattern": {"Regex": "_+"},
                             "content": " "}})",
                         "decoder: a Replace decoder with a Regex pattern is not supported"},
        BadTokenizerCase{"NegativeStrip",
                         R"({"decoder": {"type": "Strip", "content": " ", "start": -1}})",
                         "decoder.start"},
        BadTokenizerCase{"UnknownPostProcessor",
                         R"({"post_processor": {"type": "RobertaProcessing"}})",
                         "post_processor: post-processor type 'RobertaProcessing' is not "
                         "supported"},
        BadTokenizerCase{"TemplateOfAnUnknownToken",
                         R"({"post_processor": {"type": "TemplateProcessing",
                             "single": [{"SpecialToken": {"id": "<x>", "type_id": 0}},
                                        {"Sequence": {"id": "A", "type_id": 0}}],
                             "special_tokens": {}}})",
                         "post_processor.special_tokens['<x>'].ids must be a list of ids"},
        BadTokenizerCase{"BpeDropout", R"({"model": {"dropout": 0.1}})",
                         "model.dropout 0.1 is not supported: BPE dropout samples"},
        BadTokenizerCase{"ContinuingSubwordPrefix",
                         R"({"model": {"continuing_subword_prefix": "##"}})",
                         "model.continuing_subword_prefix \"##\" is not supported"},
        BadTokenizerCase{"UnkTokenNotInVocab", R"({"model": {"unk_token": "<unk>"}})",
                         "model.unk_token must be null or a token of the vocab, got \"<unk>\""},
        BadTokenizerCase{"UnknownNormalizer",
                         R"({"normalizer": {"type": "Sequence", "normalizers": [
                             {"type": "NFC"}, {"type": "StripAccents"}]}})",
                         "normalizer.normalizers[1]: normalizer type 'StripAccents' is not "
                         "supported"},
        BadTokenizerCase{"NormalizerWithoutType", R"({"normalizer": {"kind": "NFC"}})",
                         "normalizer must be an object with a string type"},
        BadTokenizerCase{"NormalizerSequenceWithoutList",
                         R"({"normalizer": {"type": "Sequence"}})",
                         "normalizer.normalizers must be a list"},
        BadTokenizerCase{"IgnoreMergesNotBool", R"({"model": {"ignore_merges": "no"}})",
                         "model.ignore_merges must be true or false"},
        BadTokenizerCase{"AddedTokenWithStringLstrip",
                         R"({"added_tokens": [{"id": 7, "content": "<|begin_of_text|>",
                             "lstrip": "yes"}]})",
                         "added_tokens[0].lstrip must be true or false"}),
    [](const ::testing::TestParamInfo<BadTokenizerCase>& info) { return info.param.test_name; });

}  // namespace
}  // namespace kvjit::hf
