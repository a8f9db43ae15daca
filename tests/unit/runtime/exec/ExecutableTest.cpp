// Loading refuses a bad, truncated or older .kvx with a message that names the
// file and what is wrong.

#include "runtime/exec/Executable.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>

#include "flatbuffers/flatbuffers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/cuda/CudaModuleVerifier.h"
#include "runtime/schema/CudaLaunchAbi.h"
#include "runtime/exec/KvxTypes.h"
#include "runtime/exec/OpTable.h"
#include "runtime/ops/RowOps.h"
#include "runtime/schema/CudaLaunchAbi.h"
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
    // Non-zero: the weight's or the arena output's reference claims to be a
    // column view.
    uint64_t weight_row_stride = 0;
    uint64_t output_row_stride = 0;
    // Parameters the Copy carries (it takes none), with or without a table.
    kvx::OpParams params_type = kvx::OpParams::NONE;
    bool params_table = true;
    // Where set, the instruction is an Elementwise chain of one step of this
    // opcode over the weight, instead of the Copy.
    std::optional<kvx::ElementwiseOpCode> elementwise_step;
    // FNV-1a of the 16 zero bytes the weight reads.
    uint64_t checksum = Fnv1a64(std::vector<uint8_t>(16, 0));
    // A CUDA module for the program, where set.
    std::function<flatbuffers::Offset<kvx::CudaModule>(flatbuffers::FlatBufferBuilder&)> cuda;
    // Where set, a second weight 'w2', which the program does not read, in
    // this layout, storage type and shape (its 16 bytes are the file's next).
    struct LaidOutWeight {
      kvx::WeightLayout layout;
      kvx::StorageType storage;
      std::vector<int64_t> shape;
    };
    std::optional<LaidOutWeight> second_weight;
  };

  // What a valid CUDA module for Build's program says, to bend one way.
  struct CudaKnobs {
    uint32_t abi_version = cuda_abi::kKernelAbiVersion;
    std::vector<uint8_t> cubin = {0x7f, 'E', 'L', 'F'};
    std::string ptx = ".version 9.0";
    std::vector<std::string> kernel_names = {"kvjit_copy_0"};
    int instructions = 1;
    uint32_t kernel = 0;
    uint32_t block_threads = 256;
    std::vector<kvx::SizeFactor> grid_x = {kvx::SizeFactor(kvx::DimKind::Tokens, 0, 1)};
    std::vector<kvx::SizeFactor> grid_y = {};
    bool gemm = false;
    uint32_t prefill_min_rows = 32;
  };

  static std::function<flatbuffers::Offset<kvx::CudaModule>(flatbuffers::FlatBufferBuilder&)>
  CudaModule(const CudaKnobs& knobs) {
    return [knobs](flatbuffers::FlatBufferBuilder& b) {
      auto launch = kvx::CreateCudaLaunchDirect(b, knobs.kernel, knobs.block_threads,
                                                &knobs.grid_x, &knobs.grid_y);
      flatbuffers::Offset<kvx::CudaGemm> gemm = 0;
      if (knobs.gemm) {
        std::vector<kvx::SizeFactor> m = {kvx::SizeFactor(kvx::DimKind::Tokens, 0, 1)};
        gemm = kvx::CreateCudaGemmDirect(b, &m, 4, 4, 0, 256);
      }
      std::vector<flatbuffers::Offset<kvx::CudaLaunch>> launches = {launch};
      std::vector<kvx::SizeFactor> scratch = {kvx::SizeFactor(kvx::DimKind::Tokens, 0, 1)};
      auto path = kvx::CreateCudaPathDirect(b, &launches, gemm, nullptr, &scratch, 256);
      std::vector<kvx::SizeFactor> rows = {kvx::SizeFactor(kvx::DimKind::Tokens, 0, 1)};
      std::vector<flatbuffers::Offset<kvx::CudaInstruction>> instructions;
      for (int i = 0; i < knobs.instructions; ++i) {
        instructions.push_back(kvx::CreateCudaInstructionDirect(b, &rows, path, path));
      }
      std::vector<flatbuffers::Offset<kvx::CudaKernel>> kernels;
      for (const std::string& name : knobs.kernel_names) {
        kernels.push_back(kvx::CreateCudaKernelDirect(b, name.c_str()));
      }
      return kvx::CreateCudaModuleDirect(b, knobs.abi_version, 90, &knobs.cubin,
                                         knobs.ptx.c_str(), "// source", 13000, nullptr,
                                         &kernels, &instructions, knobs.prefill_min_rows);
    };
  }

  // A one-instruction program (copy a weight's [4] floats into the arena)
  // with `knobs` bent to make it wrong in one way.
  std::string Build(const Knobs& knobs) {
    flatbuffers::FlatBufferBuilder b;
    auto dims = [&](int64_t n) {
      std::vector<kvx::Dim> shape = {kvx::Dim(kvx::DimKind::Static, n)};
      return b.CreateVectorOfStructs(shape);
    };
    auto weight_ref =
        kvx::CreateTensorRef(b, kvx::BufferKind::Weight, 0, 0, dims(4), knobs.weight_row_stride);
    auto arena_ref = kvx::CreateTensorRef(b, kvx::BufferKind::Arena, 0, knobs.arena_offset,
                                          dims(knobs.copy_elements), knobs.output_row_stride);
    flatbuffers::Offset<void> params = 0;
    if (knobs.params_type != kvx::OpParams::NONE && knobs.params_table) {
      params = kvx::CreateRmsNormParams(b, 1e-5f).Union();
    }
    kvx::OpCode opcode = kvx::OpCode::Copy;
    kvx::OpParams params_type = knobs.params_type;
    if (knobs.elementwise_step) {
      const std::vector<kvx::ElementwiseStep> steps = {
          kvx::ElementwiseStep(*knobs.elementwise_step, 0, 0, 0.0f)};
      opcode = kvx::OpCode::Elementwise;
      params_type = kvx::OpParams::ElementwiseParams;
      params = kvx::CreateElementwiseParamsDirect(b, &steps).Union();
    }
    auto instruction = kvx::CreateInstruction(b, opcode, b.CreateVector({weight_ref}),
                                              b.CreateVector({arena_ref}), params_type, params);
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
    std::vector<flatbuffers::Offset<kvx::Weight>> weights = {weight};
    if (knobs.second_weight) {
      weights.push_back(kvx::CreateWeight(b, b.CreateString("w2"), knobs.second_weight->storage,
                                          b.CreateVector(knobs.second_weight->shape), 0, 16, 16,
                                          knobs.checksum, knobs.second_weight->layout));
    }
    auto config = kvx::CreateModelConfig(b, b.CreateString("llama"), 0, /*vocab_size=*/4);
    // 1 layer, 1 KV head of 8 f32, blocks of 16: slot 32 B, V at 512 B, block 1024 B.
    auto kv = kvx::CreateKvLayout(b, 1, 1, 8, 16, kvx::StorageType::F32, 1024, 1024, 512, 32, 4,
                                  kvx::StorageType::F32, 32);
    flatbuffers::Offset<kvx::CudaModule> cuda = knobs.cuda ? knobs.cuda(b) : 0;
    auto root = kvx::CreateExecutable(b, knobs.schema_version, 0, config, 0,
                                      b.CreateVector({file}), b.CreateVector(weights), kv, program,
                                      cuda);
    kvx::FinishExecutableBuffer(b, root);
    return std::string(reinterpret_cast<const char*>(b.GetBufferPointer()), b.GetSize());
  }

  std::string Message(const std::string& bytes, LoadOptions options = {}) {
    const std::string path = (directory_ / "model.kvx").string();
    WriteFile(path, bytes);
    auto loaded = Executable::Load(path, options);
    return loaded.ok() ? "OK" : std::string(loaded.status().message());
  }

  // Loads `bytes` and checks its CUDA module as the module's readers do.
  std::string CudaMessage(const std::string& bytes) {
    const std::string path = (directory_ / "model.kvx").string();
    WriteFile(path, bytes);
    auto loaded = Executable::Load(path);
    if (!loaded.ok()) return std::string(loaded.status().message());
    absl::Status verified = cuda::VerifyCudaModule(**loaded);
    return verified.ok() ? "OK" : std::string(verified.message());
  }

  std::filesystem::path directory_;
  std::string weights_path_;
};

// The compile-time checks count descriptions per opcode; this holds each
// description to the opcode it is found by, and each row-wise op's file to
// a CPU kernel (codegen/cuda's emitter table holds each to a CUDA emitter at
// compile time).
TEST(OpTableTest, EachOpcodeFindsItsOwnDescription) {
  for (int i = 0; i <= static_cast<int>(kvx::OpCode::MAX); ++i) {
    const auto op = static_cast<kvx::OpCode>(i);
    const OpDescription* description = FindOp(op);
    ASSERT_NE(description, nullptr) << kvx::EnumNameOpCode(op);
    EXPECT_EQ(description->op, op) << kvx::EnumNameOpCode(op);
    if (const RowOp* row = FindRowOp(op)) {
      EXPECT_EQ(&row->description, description) << kvx::EnumNameOpCode(op);
      EXPECT_NE(row->cpu, nullptr) << kvx::EnumNameOpCode(op);
    }
  }
  EXPECT_EQ(FindOp(static_cast<kvx::OpCode>(static_cast<int>(kvx::OpCode::MAX) + 1)), nullptr);
}

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

TEST_F(ExecutableTest, LoadsAnInterleavedWeightOfABlockTypeInGroupsOfEight) {
  Knobs knobs;
  knobs.second_weight = {kvx::WeightLayout::RowsInterleaved8, kvx::StorageType::Q4_1, {16, 64}};
  EXPECT_EQ(Message(Build(knobs)), "OK");
}

TEST_F(ExecutableTest, RefusesALayoutItsWeightCannotHaveNamingTheWeight) {
  Knobs knobs;
  knobs.second_weight = {kvx::WeightLayout::RowsInterleaved8, kvx::StorageType::F32, {8, 64}};
  EXPECT_THAT(Message(Build(knobs)),
              HasSubstr("weight 'w2': RowsInterleaved8 holds 32-element blocks of q8_0, q4_0, q4_1, "
                        "q5_0 or q5_1, not F32"));
  knobs.second_weight = {kvx::WeightLayout::RowsInterleaved8, kvx::StorageType::Q8_0, {12, 64}};
  EXPECT_THAT(Message(Build(knobs)),
              HasSubstr("weight 'w2': RowsInterleaved8 needs a positive multiple of 8 rows, not 12"));
}

TEST_F(ExecutableTest, RefusesALayoutItDoesNotKnow) {
  Knobs knobs;
  knobs.second_weight = {static_cast<kvx::WeightLayout>(5), kvx::StorageType::Q8_0, {8, 64}};
  EXPECT_THAT(Message(Build(knobs)), HasSubstr("weight 'w2': layout 5 is unknown to this runtime"));
}

// The CUDA kernels read GGUF's rows only; the compiler never chooses another
// layout for --target cuda, and the runner refuses one it is given.
TEST_F(ExecutableTest, TheCudaRunnerRefusesAnInterleavedWeight) {
  Knobs knobs;
  knobs.cuda = CudaModule({});
  knobs.second_weight = {kvx::WeightLayout::RowsInterleaved8, kvx::StorageType::Q4_1, {16, 64}};
  EXPECT_THAT(CudaMessage(Build(knobs)),
              HasSubstr("cuda module: weight 'w2' has layout RowsInterleaved8, but the CUDA kernels "
                        "read GGUF's rows"));
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

// Column views are arena inputs of rank 2 or more; anything else claiming a
// row stride is refused.
TEST_F(ExecutableTest, RefusesRowStridesWhereNoViewCanBe) {
  Knobs knobs;
  knobs.weight_row_stride = 8;
  EXPECT_THAT(Message(Build(knobs)),
              HasSubstr("instruction 0 input: a weight reference has a row stride"));
  knobs = Knobs();
  knobs.output_row_stride = 8;
  EXPECT_THAT(Message(Build(knobs)),
              HasSubstr("instruction 0 output: row stride 8 does not view whole rows of a tensor "
                        "of rank 2 or more"));
}

TEST_F(ExecutableTest, RefusesAnOutputOfAnotherSizeThanTheKernelWrites) {
  Knobs knobs;
  knobs.copy_elements = 3;
  EXPECT_THAT(Message(Build(knobs)),
              HasSubstr("instruction 0 (Copy): the output's shape does not fit the inputs'"));
}

TEST_F(ExecutableTest, RefusesParametersOfAnotherOpcode) {
  Knobs knobs;
  knobs.params_type = kvx::OpParams::RmsNormParams;
  const std::string message = Message(Build(knobs));
  EXPECT_THAT(message, HasSubstr("instruction 0 (Copy)"));
  EXPECT_THAT(message, HasSubstr("carries parameters RmsNormParams where the opcode takes NONE"));
  knobs.params_table = false;
  EXPECT_THAT(Message(Build(knobs)), HasSubstr("carries parameters RmsNormParams"));
}

// A step opcode from a newer compiler is refused by name, not run as nothing.
TEST_F(ExecutableTest, RefusesAnElementwiseStepItDoesNotKnow) {
  Knobs knobs;
  knobs.elementwise_step = kvx::ElementwiseOpCode::Tanh;
  EXPECT_EQ(Message(Build(knobs)), "OK");
  knobs.elementwise_step = static_cast<kvx::ElementwiseOpCode>(200);
  EXPECT_THAT(Message(Build(knobs)),
              HasSubstr("instruction 0 (Elementwise): step 0 has elementwise opcode 200, which "
                        "this runtime does not know"));
}

TEST_F(ExecutableTest, RefusesWeightsThatChangedSinceCompilingWhenAskedToHashThem) {
  Knobs knobs;
  knobs.checksum = 42;
  LoadOptions verify;
  verify.verify_weight_checksums = true;
  EXPECT_THAT(Message(Build(knobs), verify), HasSubstr("weight 'w' in"));
  EXPECT_THAT(Message(Build(knobs), verify), HasSubstr("checksum mismatch"));
  // By default only the file's size is checked: loading reads no weight.
  EXPECT_EQ(Message(Build(knobs)), "OK");
}

TEST_F(ExecutableTest, LoadsACudaModuleAndExposesIt) {
  Knobs knobs;
  knobs.cuda = CudaModule({});
  const std::string path = (directory_ / "model.kvx").string();
  WriteFile(path, Build(knobs));
  absl::StatusOr<std::unique_ptr<Executable>> loaded = Executable::Load(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ASSERT_NE((*loaded)->cuda(), nullptr);
  EXPECT_TRUE(cuda::VerifyCudaModule(**loaded).ok());
  EXPECT_EQ((*loaded)->cuda()->kernels()->Get(0)->name()->str(), "kvjit_copy_0");
  const kvx::CudaPath& decode = *(*loaded)->cuda()->instructions()->Get(0)->decode();
  const StepSizes sizes = {/*tokens=*/5, /*logits_rows=*/1, /*sequences=*/1, /*max_blocks=*/2};
  EXPECT_EQ(SizeProduct(decode.launches()->Get(0)->grid_x(), sizes), 5);
  EXPECT_EQ(SizeProduct(decode.launches()->Get(0)->grid_y(), sizes), 1);
  EXPECT_EQ(ScratchBytes(decode, sizes), 256u + 5u);
}

TEST_F(ExecutableTest, CpuExecutablesHaveNoCudaModule) {
  const std::string path = (directory_ / "model.kvx").string();
  WriteFile(path, Build({}));
  absl::StatusOr<std::unique_ptr<Executable>> loaded = Executable::Load(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ((*loaded)->cuda(), nullptr);
}

TEST(SizeProductTest, MultipliesCeilingsOfEachFactor) {
  flatbuffers::FlatBufferBuilder b;
  std::vector<kvx::SizeFactor> factors = {kvx::SizeFactor(kvx::DimKind::Tokens, 0, 8),
                                          kvx::SizeFactor(kvx::DimKind::Static, 3, 1),
                                          kvx::SizeFactor(kvx::DimKind::SequencesPlusOne, 0, 1),
                                          kvx::SizeFactor(kvx::DimKind::MaxBlocks, 0, 4)};
  b.Finish(b.CreateVectorOfStructs(factors));
  const auto* vector =
      flatbuffers::GetRoot<flatbuffers::Vector<const kvx::SizeFactor*>>(b.GetBufferPointer());
  const StepSizes sizes = {/*tokens=*/17, /*logits_rows=*/2, /*sequences=*/2, /*max_blocks=*/9};
  // ceil(17 / 8) * 3 * (2 + 1) * ceil(9 / 4)
  EXPECT_EQ(SizeProduct(vector, sizes), 3 * 3 * 3 * 3);
  EXPECT_EQ(SizeProduct(nullptr, sizes), 1);
}

TEST_F(ExecutableTest, RefusesMalformedCudaModules) {
  struct Case {
    const char* expected;
    std::function<void(CudaKnobs&)> bend;
  };
  const std::vector<Case> cases = {
      {"kernel ABI version 99", [](CudaKnobs& k) { k.abi_version = 99; }},
      {"neither a cubin nor PTX", [](CudaKnobs& k) { k.cubin.clear(); k.ptx.clear(); }},
      {"the cubin is not an ELF image", [](CudaKnobs& k) { k.cubin = {'P', 'T', 'X', '!'}; }},
      {"has no kernels", [](CudaKnobs& k) { k.kernel_names.clear(); }},
      {"kernel name 'kvjit_copy_0' is empty or repeated",
       [](CudaKnobs& k) { k.kernel_names.push_back("kvjit_copy_0"); }},
      {"2 instructions for a program of 1", [](CudaKnobs& k) { k.instructions = 2; }},
      {"0 instructions for a program of 1", [](CudaKnobs& k) { k.instructions = 0; }},
      {"decode path, launch 0: kernel 1 of 1", [](CudaKnobs& k) { k.kernel = 1; }},
      {"0 threads per block", [](CudaKnobs& k) { k.block_threads = 0; }},
      {"2048 threads per block", [](CudaKnobs& k) { k.block_threads = 2048; }},
      {"grid x divides by 0",
       [](CudaKnobs& k) { k.grid_x = {kvx::SizeFactor(kvx::DimKind::Tokens, 0, 0)}; }},
      {"grid x has a negative size",
       [](CudaKnobs& k) { k.grid_x = {kvx::SizeFactor(kvx::DimKind::Static, -1, 1)}; }},
      {"grid y reaches 70000",
       [](CudaKnobs& k) { k.grid_y = {kvx::SizeFactor(kvx::DimKind::Static, 70000, 1)}; }},
      {"only a Linear has a GEMM", [](CudaKnobs& k) { k.gemm = true; }},
      {"prefill_min_rows is zero", [](CudaKnobs& k) { k.prefill_min_rows = 0; }},
  };
  for (const Case& c : cases) {
    CudaKnobs cuda;
    c.bend(cuda);
    Knobs knobs;
    knobs.cuda = CudaModule(cuda);
    // The loader leaves the module to its readers.
    EXPECT_EQ(Message(Build(knobs)), "OK");
    const std::string message = CudaMessage(Build(knobs));
    EXPECT_THAT(message, HasSubstr(c.expected));
    EXPECT_THAT(message, HasSubstr("model.kvx"));
  }
}

}  // namespace
}  // namespace kvjit::runtime
