#include "frontend/tokenizer/GgufVocabulary.h"

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "frontend/gguf/GgufFile.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvjit::tokenizer {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Writes the metadata-only GGUF files these tests read.
class GgufBuilder {
 public:
  GgufBuilder& String(const std::string& key, const std::string& value) {
    Key(key, kString);
    Text(value);
    return *this;
  }
  GgufBuilder& Uint32(const std::string& key, uint32_t value) {
    Key(key, kUint32);
    Raw(value);
    return *this;
  }
  GgufBuilder& Bool(const std::string& key, bool value) {
    Key(key, kBool);
    bytes_.push_back(value ? 1 : 0);
    return *this;
  }
  GgufBuilder& Strings(const std::string& key,
                       const std::vector<std::string>& values) {
    Key(key, kArray);
    Raw(kString);
    Raw(static_cast<uint64_t>(values.size()));
    for (const std::string& value : values) Text(value);
    return *this;
  }
  GgufBuilder& Int32s(const std::string& key,
                      const std::vector<int32_t>& values) {
    Key(key, kArray);
    Raw(kInt32);
    Raw(static_cast<uint64_t>(values.size()));
    for (int32_t value : values) Raw(value);
    return *this;
  }

  absl::StatusOr<std::unique_ptr<gguf::GgufFile>> Open() {
    std::vector<uint8_t> file = {'G', 'G', 'U', 'F'};
    Append(&file, uint32_t{3});
    Append(&file, uint64_t{0});  // tensors
    Append(&file, entries_);
    file.insert(file.end(), bytes_.begin(), bytes_.end());
    storage_ = std::move(file);
    return gguf::GgufFile::FromBuffer("test.gguf", storage_);
  }

 private:
  static constexpr uint32_t kUint32 = 4, kInt32 = 5, kBool = 7, kString = 8,
                            kArray = 9;

  template <typename T>
  static void Append(std::vector<uint8_t>* out, T value) {
    uint8_t raw[sizeof(T)];
    std::memcpy(raw, &value, sizeof(T));  // GGUF and the host: little-endian.
    out->insert(out->end(), raw, raw + sizeof(T));
  }
  template <typename T>
  void Raw(T value) {
    Append(&bytes_, value);
  }
  void Text(const std::string& text) {
    Raw(static_cast<uint64_t>(text.size()));
    bytes_.insert(bytes_.end(), text.begin(), text.end());
  }
  void Key(const std::string& key, uint32_t type) {
    ++entries_;
    Text(key);
    Raw(type);
  }

  uint64_t entries_ = 0;
  std::vector<uint8_t> bytes_;
  std::vector<uint8_t> storage_;
};

// The metadata of a byte-level BPE vocabulary: "a", "b", "ab" and an
// end-of-text token. Tests change a field to break one thing.
struct TinyBpe {
  std::string pre_tokenizer = "smollm";
  std::vector<int32_t> token_types = {1, 1, 1, 3};
  std::vector<std::string> merges = {"a b"};
  uint32_t eos_id = 3;

  GgufBuilder Builder() const {
    GgufBuilder builder;
    builder.String("tokenizer.ggml.model", "gpt2")
        .String("tokenizer.ggml.pre", pre_tokenizer)
        .Strings("tokenizer.ggml.tokens", {"a", "b", "ab", "<|endoftext|>"})
        .Int32s("tokenizer.ggml.token_type", token_types)
        .Strings("tokenizer.ggml.merges", merges)
        .Uint32("tokenizer.ggml.bos_token_id", 3)
        .Uint32("tokenizer.ggml.eos_token_id", eos_id)
        .Uint32("tokenizer.ggml.padding_token_id", 0xFFFFFFFF);
    return builder;
  }
};

TEST(GgufVocabulary, ReadsTheTokenizerKeys) {
  GgufBuilder builder = TinyBpe().Builder();
  auto file = builder.Open();
  ASSERT_TRUE(file.ok()) << file.status();
  auto vocabulary = ReadVocabularyFromGguf(**file);
  ASSERT_TRUE(vocabulary.ok()) << vocabulary.status();
  EXPECT_EQ(vocabulary->model, TokenizerModel::kByteLevelBpe);
  EXPECT_EQ(vocabulary->pre_tokenizer, PreTokenizer::kSmolLm);
  EXPECT_THAT(vocabulary->tokens, ElementsAre("a", "b", "ab", "<|endoftext|>"));
  EXPECT_EQ(vocabulary->token_types[3], TokenType::kControl);
  ASSERT_EQ(vocabulary->merges.size(), 1u);
  EXPECT_EQ(vocabulary->merges[0].first, "a");
  EXPECT_EQ(vocabulary->merges[0].second, "b");
  EXPECT_EQ(vocabulary->bos_id, 3);
  EXPECT_EQ(vocabulary->padding_id, kNoToken);
  EXPECT_EQ(vocabulary->unknown_id, kNoToken);
  EXPECT_FALSE(vocabulary->add_bos_token);
  EXPECT_FALSE(vocabulary->add_space_prefix);

  auto tokenizer = LoadTokenizerFromGguf(**file);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  auto ids = (*tokenizer)->Encode("ab<|endoftext|>", true, true);
  ASSERT_TRUE(ids.ok()) << ids.status();
  EXPECT_THAT(*ids, ElementsAre(2, 3));
}

TEST(GgufVocabulary, SentencePieceDefaultsToBosAndSpacePrefix) {
  GgufBuilder builder;
  builder.String("tokenizer.ggml.model", "llama")
      .Strings("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>"})
      .Int32s("tokenizer.ggml.token_type", {2, 3, 3})
      .Uint32("tokenizer.ggml.bos_token_id", 1);
  auto file = builder.Open();
  ASSERT_TRUE(file.ok()) << file.status();
  auto vocabulary = ReadVocabularyFromGguf(**file);
  ASSERT_TRUE(vocabulary.ok()) << vocabulary.status();
  EXPECT_TRUE(vocabulary->add_bos_token);
  EXPECT_TRUE(vocabulary->add_space_prefix);
  EXPECT_FALSE(vocabulary->add_eos_token);
}

TEST(GgufVocabulary, FlagsOverrideDefaults) {
  GgufBuilder builder = TinyBpe().Builder();
  builder.Bool("tokenizer.ggml.add_bos_token", true);
  auto file = builder.Open();
  ASSERT_TRUE(file.ok()) << file.status();
  auto vocabulary = ReadVocabularyFromGguf(**file);
  ASSERT_TRUE(vocabulary.ok()) << vocabulary.status();
  EXPECT_TRUE(vocabulary->add_bos_token);
}

std::string ErrorOf(GgufBuilder& builder) {
  auto file = builder.Open();
  EXPECT_TRUE(file.ok()) << file.status();
  if (!file.ok()) return "";
  auto tokenizer = LoadTokenizerFromGguf(**file);
  EXPECT_FALSE(tokenizer.ok());
  return tokenizer.ok() ? "" : std::string(tokenizer.status().message());
}

TEST(GgufVocabulary, ExplainsWhatIsWrong) {
  GgufBuilder no_model;
  no_model.Strings("tokenizer.ggml.tokens", {"a"});
  EXPECT_THAT(ErrorOf(no_model), HasSubstr("tokenizer.ggml.model"));

  GgufBuilder bert;
  bert.String("tokenizer.ggml.model", "bert");
  EXPECT_THAT(ErrorOf(bert), HasSubstr("\"bert\" is not supported"));

  TinyBpe unknown_pre;
  unknown_pre.pre_tokenizer = "falcon";
  GgufBuilder unknown_pre_builder = unknown_pre.Builder();
  EXPECT_THAT(ErrorOf(unknown_pre_builder),
              HasSubstr("\"falcon\" is not supported"));

  TinyBpe bad_type;
  bad_type.token_types = {1, 1, 9, 3};
  GgufBuilder bad_type_builder = bad_type.Builder();
  EXPECT_THAT(ErrorOf(bad_type_builder), HasSubstr("token_type[2] is 9"));

  TinyBpe bad_merge;
  bad_merge.merges = {"ab"};
  GgufBuilder bad_merge_builder = bad_merge.Builder();
  EXPECT_THAT(ErrorOf(bad_merge_builder), HasSubstr("merges[0]"));

  TinyBpe bad_id;
  bad_id.eos_id = 7;
  GgufBuilder bad_id_builder = bad_id.Builder();
  EXPECT_THAT(ErrorOf(bad_id_builder), HasSubstr("EOS token id 7 is outside"));
}

}  // namespace
}  // namespace kvjit::tokenizer
