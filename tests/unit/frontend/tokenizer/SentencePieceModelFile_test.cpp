// kvjit's reading of a SentencePiece tokenizer.model against the
// `sentencepiece` package: tests/data/sentencepiece holds a small model
// trained as Llama 2's was and the ids sentencepiece encodes 1,000 texts to
// (tools/scripts/sentencepiece_cases.py writes both).

#include "frontend/tokenizer/SentencePieceModelFile.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "frontend/tokenizer/HfVocabulary.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/unit/common/TestPaths.h"
#include "tests/unit/frontend/huggingface/SafetensorsTestFiles.h"
#include "tests/unit/frontend/tokenizer/ConformanceCases.h"

namespace kvjit::tokenizer {
namespace {

using ::kvjit::safetensors::testing::TempDir;
using ::kvjit::tokenizer::testing::ReadFile;
using ::testing::HasSubstr;

std::string ModelBytes() {
  const std::string path = kvjit::testing::TestDataPath("sentencepiece/llama_style.model");
  std::string bytes;
  if (path.empty() || !ReadFile(path, &bytes)) {
    ADD_FAILURE() << "cannot read tests/data/sentencepiece/llama_style.model";
  }
  return bytes;
}

TEST(SentencePieceModelFile, EncodesTheCorpusAsSentencePieceDoes) {
  const std::string path = kvjit::testing::TestDataPath("sentencepiece/llama_style.ids.json");
  std::string text;
  ASSERT_TRUE(!path.empty() && ReadFile(path, &text));
  const nlohmann::json cases = nlohmann::json::parse(text);
  absl::StatusOr<Vocabulary> vocabulary = ParseSentencePieceModel(ModelBytes(), "llama_style");
  ASSERT_TRUE(vocabulary.ok()) << vocabulary.status();
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer = CreateTokenizer(*std::move(vocabulary));
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  const auto& texts = cases["texts"];
  ASSERT_EQ(texts.size(), 1000u);
  int mismatches = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    const std::string input = texts[i].get<std::string>();
    const std::vector<int32_t> expected = cases["ids"][i].get<std::vector<int32_t>>();
    absl::StatusOr<std::vector<int32_t>> ids =
        (*tokenizer)->Encode(input, /*add_special=*/false, /*parse_special=*/false);
    ASSERT_TRUE(ids.ok()) << "text " << i << ": " << ids.status();
    if (*ids != expected && ++mismatches <= 5) {
      ADD_FAILURE() << "text " << i << " " << nlohmann::json(input).dump() << ": kvjit "
                    << nlohmann::json(*ids).dump() << ", sentencepiece "
                    << nlohmann::json(expected).dump();
    }
    EXPECT_EQ((*tokenizer)->Decode(expected), cases["decoded"][i].get<std::string>())
        << "text " << i;
  }
  EXPECT_EQ(mismatches, 0) << "of " << texts.size() << " texts";
}

TEST(SentencePieceModelFile, ReadsTheSpecialIdsAndFlags) {
  absl::StatusOr<Vocabulary> vocabulary = ParseSentencePieceModel(ModelBytes(), "llama_style");
  ASSERT_TRUE(vocabulary.ok()) << vocabulary.status();
  EXPECT_EQ(vocabulary->tokens.size(), 1200u);
  EXPECT_EQ(vocabulary->unknown_id, 0);
  EXPECT_EQ(vocabulary->bos_id, 1);
  EXPECT_EQ(vocabulary->eos_id, 2);
  EXPECT_EQ(vocabulary->padding_id, kNoToken);
  EXPECT_EQ(vocabulary->tokens[1], "<s>");
  EXPECT_EQ(vocabulary->token_types[1], TokenType::kControl);
  EXPECT_EQ(vocabulary->token_types[3], TokenType::kUserDefined);
  EXPECT_EQ(vocabulary->tokens[4], "<0x00>");
  EXPECT_EQ(vocabulary->token_types[4], TokenType::kByte);
  EXPECT_TRUE(vocabulary->add_bos_token);
  EXPECT_TRUE(vocabulary->add_space_prefix);
}

TEST(SentencePieceModelFile, ADirectoryWithOnlyTokenizerModelTokenizesWithIt) {
  TempDir directory;
  directory.WriteFile("tokenizer.model", ModelBytes());
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer =
      LoadTokenizerFromHfDirectory(directory.path());
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  absl::StatusOr<std::vector<int32_t>> ids =
      (*tokenizer)->Encode("Hello world", /*add_special=*/true, /*parse_special=*/false);
  ASSERT_TRUE(ids.ok()) << ids.status();
  ASSERT_FALSE(ids->empty());
  EXPECT_EQ(ids->front(), 1);  // BOS, as transformers' LlamaTokenizer adds it
  EXPECT_EQ((*tokenizer)->Decode(*ids), "Hello world");
  // tokenizer_config.json's add_bos_token still decides.
  directory.WriteFile("tokenizer_config.json", R"({"add_bos_token": false})");
  tokenizer = LoadTokenizerFromHfDirectory(directory.path());
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  ids = (*tokenizer)->Encode("Hello world", /*add_special=*/true, /*parse_special=*/false);
  ASSERT_TRUE(ids.ok());
  EXPECT_NE(ids->front(), 1);
}

// A ModelProto by hand: one normal piece, and the trainer and normalizer
// specs given as their encoded fields.
std::string Varint(uint64_t value) {
  std::string out;
  do {
    uint8_t byte = value & 0x7f;
    value >>= 7;
    out.push_back(static_cast<char>(byte | (value ? 0x80 : 0)));
  } while (value);
  return out;
}
std::string LengthDelimited(uint32_t field, const std::string& bytes) {
  return Varint(field << 3 | 2) + Varint(bytes.size()) + bytes;
}
std::string VarintField(uint32_t field, uint64_t value) { return Varint(field << 3) + Varint(value); }

std::string HandMadeModel(uint64_t model_type, const std::string& normalizer_name,
                          bool remove_extra_whitespaces,
                          const std::vector<std::string>& piece_texts = {"<unk>", "<s>", "</s>",
                                                                         "a"}) {
  std::string pieces;
  for (const std::string& piece : piece_texts) {
    pieces += LengthDelimited(1, LengthDelimited(1, piece));
  }
  const std::string trainer = VarintField(3, model_type) + VarintField(35, 1);
  const std::string normalizer = LengthDelimited(1, normalizer_name) +
                                 VarintField(4, remove_extra_whitespaces ? 1 : 0);
  return pieces + LengthDelimited(2, trainer) + LengthDelimited(3, normalizer);
}

TEST(SentencePieceModelFile, AHandMadeBpeModelReads) {
  absl::StatusOr<Vocabulary> vocabulary =
      ParseSentencePieceModel(HandMadeModel(2, "identity", false), "m.model");
  ASSERT_TRUE(vocabulary.ok()) << vocabulary.status();
  EXPECT_EQ(vocabulary->tokens, (std::vector<std::string>{"<unk>", "<s>", "</s>", "a"}));
}

TEST(SentencePieceModelFile, WhatItDoesNotRunIsRefusedNamingTheField) {
  EXPECT_THAT(ParseSentencePieceModel(HandMadeModel(1, "identity", false), "m.model")
                  .status().message(),
              HasSubstr("m.model: trainer_spec.model_type is UNIGRAM; kvjit runs "
                        "SentencePiece's BPE models only"));
  EXPECT_THAT(ParseSentencePieceModel(HandMadeModel(2, "nmt_nfkc", false), "m.model")
                  .status().message(),
              HasSubstr("m.model: normalizer_spec.name is 'nmt_nfkc'"));
  EXPECT_THAT(ParseSentencePieceModel(HandMadeModel(2, "identity", true), "m.model")
                  .status().message(),
              HasSubstr("m.model: normalizer_spec.remove_extra_whitespaces is true"));
}

// Found by tests/fuzz/sentencepiece_model_fuzzer: pieces SentencePiece
// itself refuses were taken (the first of two equal pieces won).
TEST(SentencePieceModelFile, PiecesSentencePieceRefusesAreRefusedNamingThem) {
  EXPECT_THAT(ParseSentencePieceModel(HandMadeModel(2, "identity", false,
                                                    {"<unk>", "<s>", "</s>", "a", "b", "a"}),
                                      "m.model")
                  .status().message(),
              HasSubstr("m.model: pieces[5] 'a' repeats pieces[3]"));
  EXPECT_THAT(ParseSentencePieceModel(HandMadeModel(2, "identity", false, {"<unk>", "<s>", "</s>", ""}),
                                      "m.model")
                  .status().message(),
              HasSubstr("m.model: pieces[3]: the piece is empty"));
  EXPECT_THAT(ParseSentencePieceModel(
                  HandMadeModel(2, "identity", false, {"<unk>", "<s>", "</s>", "\xC3"}), "m.model")
                  .status().message(),
              HasSubstr("m.model: pieces[3]: the piece is not UTF-8"));
  // The same pieces all different and whole read.
  EXPECT_TRUE(ParseSentencePieceModel(
                  HandMadeModel(2, "identity", false, {"<unk>", "<s>", "</s>", "a", "b", "\xC3\xA9"}),
                  "m.model")
                  .ok());
}

TEST(SentencePieceModelFile, BrokenBytesAreRefusedWithWhereTheyBreak) {
  const std::string model = ModelBytes();
  // Cut inside the pieces: a length runs past the end.
  absl::StatusOr<Vocabulary> cut = ParseSentencePieceModel(model.substr(0, 100), "cut.model");
  ASSERT_FALSE(cut.ok());
  EXPECT_THAT(cut.status().message(), HasSubstr("cut.model"));
  EXPECT_THAT(cut.status().message(), HasSubstr("truncated"));
  EXPECT_THAT(ParseSentencePieceModel("", "empty.model").status().message(),
              HasSubstr("empty.model: no pieces: not a SentencePiece model file"));
  EXPECT_THAT(ParseSentencePieceModel(std::string("\x0f", 1), "bad.model").status().message(),
              HasSubstr("bad.model: field 1 has wire type 7"));
  EXPECT_THAT(ReadVocabularyFromSentencePieceModel("/nonexistent/tokenizer.model")
                  .status().message(),
              HasSubstr("/nonexistent/tokenizer.model: cannot be opened"));
  // Every prefix is refused or read, never a crash.
  for (size_t length = 0; length < model.size(); length += 97) {
    (void)ParseSentencePieceModel(model.substr(0, length), "prefix.model");
  }
}

}  // namespace
}  // namespace kvjit::tokenizer
