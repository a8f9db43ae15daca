#include <string>

#include "frontend/gguf/GgufFile.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/common/TestPaths.h"

namespace kvjit::gguf {
namespace {

using ::testing::ElementsAre;
using ::kvjit::testing::SharedPath;

TEST(GgufSharedFilesTest, Stories260K) {
  const std::string path = SharedPath("models/stories260K.gguf");
  if (path.empty()) GTEST_SKIP() << "models/stories260K.gguf not found in the shared test material";
  absl::StatusOr<std::unique_ptr<GgufFile>> file = GgufFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  const GgufFile& gguf = **file;
  EXPECT_EQ(gguf.version(), 3u);
  EXPECT_EQ(gguf.alignment(), 32u);
  EXPECT_EQ(*gguf.GetString("general.architecture"), "llama");
  EXPECT_EQ(*gguf.GetUint("llama.embedding_length"), 64u);
  EXPECT_EQ(*gguf.GetUint("llama.block_count"), 5u);
  EXPECT_EQ(*gguf.GetUint("llama.attention.head_count"), 8u);
  EXPECT_EQ(*gguf.GetUint("llama.attention.head_count_kv"), 4u);
  EXPECT_EQ(*gguf.GetUint("llama.feed_forward_length"), 172u);
  EXPECT_EQ(*gguf.GetString("tokenizer.ggml.model"), "llama");
  EXPECT_EQ(gguf.GetStringArray("tokenizer.ggml.tokens")->size(), 512u);
  EXPECT_EQ(gguf.GetFloatArray("tokenizer.ggml.scores")->size(), 512u);
  EXPECT_EQ(gguf.GetIntArray("tokenizer.ggml.token_type")->size(), 512u);

  // 5 blocks of 9 tensors (attn_norm, q, k, v, output, ffn_norm, gate, up,
  // down) plus token_embd, output_norm and output.
  EXPECT_EQ(gguf.tensors().size(), 5u * 9 + 3);
  EXPECT_EQ(gguf.tensors()[2].name, "output.weight");
  absl::StatusOr<const GgufTensor*> embedding = gguf.GetTensor("token_embd.weight");
  ASSERT_TRUE(embedding.ok()) << embedding.status();
  EXPECT_THAT((*embedding)->dims, ElementsAre(64, 512));
  EXPECT_EQ((*embedding)->type, quant::StorageType::kF32);
  EXPECT_EQ((*embedding)->size_bytes, 64u * 512 * 4);
  absl::StatusOr<const GgufTensor*> wk = gguf.GetTensor("blk.4.attn_k.weight");
  ASSERT_TRUE(wk.ok()) << wk.status();
  EXPECT_THAT((*wk)->dims, ElementsAre(64, 32));  // 4 KV heads of 8
  absl::StatusOr<const GgufTensor*> down = gguf.GetTensor("blk.0.ffn_down.weight");
  ASSERT_TRUE(down.ok()) << down.status();
  EXPECT_THAT((*down)->dims, ElementsAre(172, 64));
  for (const GgufTensor& tensor : gguf.tensors()) {
    EXPECT_EQ(tensor.file_offset % gguf.alignment(), 0u) << tensor.name;
    EXPECT_EQ(tensor.data.size(), tensor.size_bytes) << tensor.name;
  }
}

TEST(GgufSharedFilesTest, LlamaSentencePieceVocab) {
  const std::string path = SharedPath("testdata/tokenizer/ggml-vocab-llama-spm.gguf");
  if (path.empty()) GTEST_SKIP() << "testdata/tokenizer/ggml-vocab-llama-spm.gguf not found in the shared test material";
  absl::StatusOr<std::unique_ptr<GgufFile>> file = GgufFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(*(*file)->GetString("tokenizer.ggml.model"), "llama");
  absl::StatusOr<std::vector<absl::string_view>> tokens = (*file)->GetStringArray("tokenizer.ggml.tokens");
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  EXPECT_EQ(tokens->size(), 32000u);
  EXPECT_EQ((*tokens)[1], "<s>");
  EXPECT_EQ((*file)->GetFloatArray("tokenizer.ggml.scores")->size(), 32000u);
  EXPECT_TRUE((*file)->tensors().empty());
}

TEST(GgufSharedFilesTest, Gpt2Vocab) {
  const std::string path = SharedPath("testdata/tokenizer/ggml-vocab-gpt-2.gguf");
  if (path.empty()) GTEST_SKIP() << "testdata/tokenizer/ggml-vocab-gpt-2.gguf not found in the shared test material";
  absl::StatusOr<std::unique_ptr<GgufFile>> file = GgufFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(*(*file)->GetString("tokenizer.ggml.model"), "gpt2");
  EXPECT_EQ((*file)->GetStringArray("tokenizer.ggml.tokens")->size(), 50257u);
  EXPECT_EQ((*file)->GetStringArray("tokenizer.ggml.merges")->size(), 50000u);
}

}  // namespace
}  // namespace kvjit::gguf
