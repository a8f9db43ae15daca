// Loading refuses a bad, truncated or older .kvx with a message that names the
// file and what is wrong.

#include "runtime/exec/Executable.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>

#include "flatbuffers/flatbuffers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/exec/KvxTypes.h"
#include "runtime/schema/SchemaVersion.h"

namespace kvjit::runtime {
namespace {

using ::testing::HasSubstr;

class ExecutableTest : public ::testing::Test {
 protected:
  void SetUp() override {
    directory_ = std::filesystem::temp_directory_path() /
                 ("kvjit-exec-test-" + std::to_string(::getpid()) + "-" +
                  ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(directory_);
    weights_path_ = (directory_ / "weights.bin").string();
    WriteFile(weights_path_, std::string(64, '\0'));
  }
  void TearDown() override { std::filesystem::remove_all(directory_); }

  static void WriteFile(const std::string& path, const std::string& bytes) {
    std::ofstream(path, std::ios::binary) << bytes;
  }

  struct Knobs {
    uint32_t schema_version = kvx::kSchemaVersion;
    uint64_t weight_file_size = 64;
    uint64_t weight_offset = 0;
    uint64_t arena_offset = 0;
    uint64_t logits_offset = 0;
    int64_t copy_elements = 4;
    // FNV-1a of the 16 zero bytes the weight reads.
    uint64_t checksum = Fnv1a64(std::vector<uint8_t>(16, 0));
  };

  // A one-instruction program (copy a weight's [4] floats into the arena)
  // with `knobs` bent to make it wrong in one way.
  std::string Build(const Knobs& knobs) {
    flatbuffers::FlatBufferBuilder b;
    auto dims = [&](int64_t n) {
      std::vector<kvx::Dim> shape = {kvx::Dim(kvx::DimKind::Static, n)};
      return b.CreateVectorOfStructs(shape);
    };
    auto weight_ref = kvx::CreateTensorRef(b, kvx::BufferKind::Weight, 0, 0, dims(4));
    auto arena_ref = kvx::CreateTensorRef(b, kvx::BufferKind::Arena, 0, knobs.arena_offset,
                                          dims(knobs.copy_elements));
    auto instruction = kvx::CreateInstruction(b, kvx::OpCode::Copy, b.CreateVector({weight_ref}),
                                              b.CreateVector({arena_ref}));
    std::vector<kvx::Dim> logits_shape = {kvx::Dim(kvx::DimKind::LogitsRows, 0),
                                          kvx::Dim(kvx::DimKind::Static, 4)};
    auto logits = kvx::CreateTensorRef(b, kvx::BufferKind::Arena, 0, knobs.logits_offset,
                                       b.CreateVectorOfStructs(logits_shape));
    auto program = kvx::CreateProgram(b, b.CreateVector({instruction}), logits,
                                      /*arena_bytes=*/128, /*max_tokens=*/8);
    auto file = kvx::CreateWeightFile(b, b.CreateString(weights_path_), knobs.weight_file_size);
    std::vector<int64_t> shape = {4};
    auto weight = kvx::CreateWeight(b, b.CreateString("w"), kvx::StorageType::F32,
                                    b.CreateVector(shape), 0, knobs.weight_offset, 16,
                                    knobs.checksum);
    auto config = kvx::CreateModelConfig(b, b.CreateString("llama"), 0, /*vocab_size=*/4);
    // 1 layer, 1 KV head of 8 f32, blocks of 16: slot 32 B, V at 512 B, block 1024 B.
    auto kv = kvx::CreateKvLayout(b, 1, 1, 8, 16, kvx::StorageType::F32, 1024, 1024, 512, 32, 4);
    auto root = kvx::CreateExecutable(b, knobs.schema_version, 0, config, 0,
                                      b.CreateVector({file}), b.CreateVector({weight}), kv, program);
    kvx::FinishExecutableBuffer(b, root);
    return std::string(reinterpret_cast<const char*>(b.GetBufferPointer()), b.GetSize());
  }

  std::string Message(const std::string& bytes) {
    const std::string path = (directory_ / "model.kvx").string();
    WriteFile(path, bytes);
    auto loaded = Executable::Load(path);
    return loaded.ok() ? "OK" : std::string(loaded.status().message());
  }

  std::filesystem::path directory_;
  std::string weights_path_;
};

TEST_F(ExecutableTest, LoadsAValidExecutable) {
  EXPECT_EQ(Message(Build({})), "OK");
}

TEST_F(ExecutableTest, RefusesAFileThatIsNoExecutable) {
  EXPECT_THAT(Message("GGUF and then some bytes"), HasSubstr("not a kvjit executable"));
  EXPECT_THAT(Message(""), HasSubstr("not a kvjit executable"));
}

TEST_F(ExecutableTest, RefusesATruncatedExecutable) {
  const std::string whole = Build({});
  EXPECT_THAT(Message(whole.substr(0, whole.size() - 24)),
              HasSubstr("truncated or corrupt"));
}

TEST_F(ExecutableTest, RefusesAnOlderSchema) {
  Knobs knobs;
  knobs.schema_version = kvx::kSchemaVersion - 1;
  EXPECT_THAT(Message(Build(knobs)), HasSubstr("recompile the model with this kvjit"));
}

TEST_F(ExecutableTest, RefusesAWeightFileOfAnotherSize) {
  Knobs knobs;
  knobs.weight_file_size = 128;
  EXPECT_THAT(Message(Build(knobs)), HasSubstr("was compiled against 128"));
}

TEST_F(ExecutableTest, RefusesAMissingWeightFile) {
  std::filesystem::remove(weights_path_);
  EXPECT_THAT(Message(Build({})), HasSubstr("weights.bin"));
}

TEST_F(ExecutableTest, RefusesAWeightPastTheEndOfItsFile) {
  Knobs knobs;
  knobs.weight_offset = 56;
  EXPECT_THAT(Message(Build(knobs)), HasSubstr("weight 'w' at offset 56 (16 bytes) lies past"));
}

TEST_F(ExecutableTest, RefusesAnArenaReferencePastTheArena) {
  Knobs knobs;
  knobs.arena_offset = 120;
  EXPECT_THAT(Message(Build(knobs)), HasSubstr("instruction 0 output: arena bytes [120, 136)"));
}

TEST_F(ExecutableTest, RefusesLogitsThatDoNotFitTheArenaForTheMostTokens) {
  Knobs knobs;
  knobs.logits_offset = 16;
  EXPECT_THAT(Message(Build(knobs)), HasSubstr("logits: arena bytes [16, 144)"));
}

TEST_F(ExecutableTest, RefusesAnUnalignedArenaOffset) {
  Knobs knobs;
  knobs.arena_offset = 2;
  EXPECT_THAT(Message(Build(knobs)), HasSubstr("arena offset 2 is not a multiple of 4"));
}

TEST_F(ExecutableTest, RefusesAnOutputOfAnotherSizeThanTheKernelWrites) {
  Knobs knobs;
  knobs.copy_elements = 3;
  EXPECT_THAT(Message(Build(knobs)),
              HasSubstr("instruction 0 (Copy): the output's shape does not fit the inputs'"));
}

TEST_F(ExecutableTest, RefusesWeightsThatChangedSinceCompiling) {
  Knobs knobs;
  knobs.checksum = 42;
  EXPECT_THAT(Message(Build(knobs)), HasSubstr("weight 'w' in"));
  EXPECT_THAT(Message(Build(knobs)), HasSubstr("checksum mismatch"));
}

}  // namespace
}  // namespace kvjit::runtime
