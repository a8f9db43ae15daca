// kvjit's reading of SentencePiece-born tokenizer.json files against Hugging
// Face's `tokenizers` package: tests/data/hf_tokenizers/sp_*.tokenizer.json
// were made from the SentencePiece models in tests/data/sentencepiece by
// transformers' own converters (LlamaConverter in its legacy Prepend/Replace
// form and its Metaspace form, GemmaConverter) and variants of them (every
// prepend scheme, normalizers, no byte fallback, ignore_merges, added tokens
// with lstrip, rstrip, single_word and normalized); sp_*.cases.json hold 1,000
// texts each and what `tokenizers` encodes and decodes them to.
// tools/scripts/sentencepiece_tokenizer_json_cases.py writes both. Every
// tokenizer is carried through an executable's Tokenizer table first, as
// `kvjit run` carries it.

#include <memory>
#include <string>
#include <vector>

#include "frontend/huggingface/HfTokenizerJson.h"
#include "frontend/tokenizer/HfVocabulary.h"
#include "frontend/tokenizer/SentencePieceModelFile.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/unit/common/TestPaths.h"
#include "tests/unit/frontend/tokenizer/ConformanceCases.h"
#include "tests/unit/frontend/tokenizer/ThroughExecutable.h"

namespace kvjit::tokenizer {
namespace {

using ::kvjit::tokenizer::testing::ReadFile;

std::string ReadDataFile(const std::string& relative) {
  const std::string path = kvjit::testing::TestDataPath(relative);
  std::string text;
  if (path.empty() || !ReadFile(path, &text)) ADD_FAILURE() << "cannot read tests/data/" << relative;
  return text;
}

absl::StatusOr<Vocabulary> VocabularyOfVariant(const std::string& name) {
  const std::string source = "sp_" + name + ".tokenizer.json";
  absl::StatusOr<hf::BpeTokenizerJson> json =
      hf::ParseBpeTokenizerJson(ReadDataFile("hf_tokenizers/" + source), source);
  if (!json.ok()) return json.status();
  return VocabularyFromHfTokenizerJson(*json, source);
}

std::string Quoted(const std::string& text) { return nlohmann::json(text).dump(); }
std::string Listed(const std::vector<int32_t>& ids) { return nlohmann::json(ids).dump(); }

class SentencePieceTokenizerJson : public ::testing::TestWithParam<const char*> {};

TEST_P(SentencePieceTokenizerJson, EncodesAndDecodesTheCorpusAsTokenizersDoes) {
  const nlohmann::json cases =
      nlohmann::json::parse(ReadDataFile(std::string("hf_tokenizers/sp_") + GetParam() + ".cases.json"));
  absl::StatusOr<Vocabulary> vocabulary = VocabularyOfVariant(GetParam());
  ASSERT_TRUE(vocabulary.ok()) << vocabulary.status();
  EXPECT_EQ(vocabulary->model, TokenizerModel::kCharacterBpe);
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer = TokenizerThroughExecutable(*vocabulary);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  const auto& texts = cases["texts"];
  ASSERT_GE(texts.size(), 1000u);
  int mismatches = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    const std::string text = texts[i].get<std::string>();
    const auto expected = cases["ids"][i].get<std::vector<int32_t>>();
    const auto expected_with_special = cases["ids_with_special"][i].get<std::vector<int32_t>>();
    const std::string expected_text = cases["decoded"][i].get<std::string>();
    absl::StatusOr<std::vector<int32_t>> ids =
        (*tokenizer)->Encode(text, /*add_special=*/false, /*parse_special=*/true);
    ASSERT_TRUE(ids.ok()) << "text " << i << ": " << ids.status();
    absl::StatusOr<std::vector<int32_t>> ids_with_special =
        (*tokenizer)->Encode(text, /*add_special=*/true, /*parse_special=*/true);
    ASSERT_TRUE(ids_with_special.ok()) << "text " << i << ": " << ids_with_special.status();
    const std::string decoded = (*tokenizer)->Decode(expected);
    if ((*ids != expected || *ids_with_special != expected_with_special ||
         decoded != expected_text) &&
        ++mismatches <= 5) {
      ADD_FAILURE() << "text " << i << " " << Quoted(text) << "\n  ids:          kvjit "
                    << Listed(*ids) << "\n                tokenizers " << Listed(expected)
                    << "\n  with special: kvjit " << Listed(*ids_with_special)
                    << "\n                tokenizers " << Listed(expected_with_special)
                    << "\n  decoded:      kvjit " << Quoted(decoded) << "\n                tokenizers "
                    << Quoted(expected_text);
    }
  }
  EXPECT_EQ(mismatches, 0) << "of " << texts.size() << " texts";
}

INSTANTIATE_TEST_SUITE_P(
    Variants, SentencePieceTokenizerJson,
    ::testing::Values("llama_legacy", "llama_metaspace", "gemma", "metaspace_always_split",
                      "metaspace_never", "normalizers", "unk_no_fallback", "unk_unfused",
                      "ignore_merges", "added_flags", "added_flags_legacy"));

struct GgufPair {
  const char* variant;
  const char* model;
};

class SentencePieceTokenizerJsonGguf : public ::testing::TestWithParam<GgufPair> {};

// A model's tokenizer.json tokenizes as its GGUF vocabulary does: llama.cpp,
// like the legacy form's Prepend, puts a space before every stretch of text
// between special tokens (Gemma's puts none).
TEST_P(SentencePieceTokenizerJsonGguf, EqualsTheGgufVocabularyOfTheSameModel) {
  const nlohmann::json cases = nlohmann::json::parse(
      ReadDataFile(std::string("hf_tokenizers/sp_") + GetParam().variant + ".cases.json"));
  absl::StatusOr<Vocabulary> json_vocabulary = VocabularyOfVariant(GetParam().variant);
  ASSERT_TRUE(json_vocabulary.ok()) << json_vocabulary.status();
  absl::StatusOr<std::unique_ptr<Tokenizer>> from_json = CreateTokenizer(*std::move(json_vocabulary));
  ASSERT_TRUE(from_json.ok()) << from_json.status();
  // What llama.cpp's converter writes for this model: its pieces, scores
  // and types, the prefix before each stretch of text.
  const std::string model_bytes =
      ReadDataFile(std::string("sentencepiece/") + GetParam().model + ".model");
  absl::StatusOr<Vocabulary> gguf_vocabulary = ParseSentencePieceModel(model_bytes, GetParam().model);
  ASSERT_TRUE(gguf_vocabulary.ok()) << gguf_vocabulary.status();
  gguf_vocabulary->space_prefix_once = false;
  absl::StatusOr<std::unique_ptr<Tokenizer>> from_gguf = TokenizerThroughExecutable(*gguf_vocabulary);
  ASSERT_TRUE(from_gguf.ok()) << from_gguf.status();
  int mismatches = 0;
  for (const auto& entry : cases["texts"]) {
    const std::string text = entry.get<std::string>();
    absl::StatusOr<std::vector<int32_t>> json_ids = (*from_json)->Encode(text, true, true);
    absl::StatusOr<std::vector<int32_t>> gguf_ids = (*from_gguf)->Encode(text, true, true);
    ASSERT_TRUE(json_ids.ok() && gguf_ids.ok()) << Quoted(text);
    if (*json_ids != *gguf_ids && ++mismatches <= 5) {
      ADD_FAILURE() << Quoted(text) << ": tokenizer.json " << Listed(*json_ids) << ", GGUF "
                    << Listed(*gguf_ids);
    }
  }
  EXPECT_EQ(mismatches, 0) << "of " << cases["texts"].size() << " texts";
}

INSTANTIATE_TEST_SUITE_P(Models, SentencePieceTokenizerJsonGguf,
                         ::testing::Values(GgufPair{"llama_legacy", "llama_style"},
                                           GgufPair{"gemma", "gemma_style"}),
                         [](const ::testing::TestParamInfo<GgufPair>& info) {
                           return std::string(info.param.variant);
                         });

}  // namespace
}  // namespace kvjit::tokenizer
