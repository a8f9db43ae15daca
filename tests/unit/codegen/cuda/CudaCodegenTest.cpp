// Kernel generation from programs: one kernel per distinct specialisation,
// launches that name them, and the paths the launch contract
// (runtime/schema/kvx.fbs, runtime/schema/CudaLaunchAbi.h) describes. NVRTC
// compiles the same modules in NvrtcCompileTest.

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "codegen/cuda/CudaCodegen.h"
#include "codegen/cuda/KernelEmitter.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/schema/KvCacheFormat.h"
#include "tests/unit/codegen/cuda/CudaTestExecutables.h"
#include "tests/unit/common/TestPaths.h"

namespace kvjit::codegen::cuda {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

const kvx::Executable& Parse(const std::string& bytes) { return *kvx::GetExecutable(bytes.data()); }

// Every launch names a kernel of the module, and every kernel is an entry of
// the source that some launch runs.
void ExpectLaunchesNameKernels(const CudaModuleSpec& module) {
  std::set<uint32_t> launched;
  auto check = [&](const std::vector<LaunchSpec>& launches) {
    for (const LaunchSpec& launch : launches) {
      ASSERT_LT(launch.kernel, module.kernel_names.size());
      EXPECT_GE(launch.block_threads, 32u);
      EXPECT_LE(launch.block_threads, 1024u);
      EXPECT_EQ(launch.block_threads % 32, 0u);
      launched.insert(launch.kernel);
    }
  };
  for (const InstructionSpec& instruction : module.instructions) {
    for (const PathSpec* path : {&instruction.decode, &instruction.prefill}) {
      check(path->launches);
      check(path->epilogue);
    }
  }
  EXPECT_EQ(launched.size(), module.kernel_names.size());
  std::set<std::string> names(module.kernel_names.begin(), module.kernel_names.end());
  EXPECT_EQ(names.size(), module.kernel_names.size());
  for (const std::string& name : module.kernel_names) {
    EXPECT_THAT(module.source,
                HasSubstr(absl::StrCat("\n", name, "(const kvjit::cuda_abi::LaunchArgs args) {")));
  }
  EXPECT_THAT(module.source, Not(HasSubstr(KernelTable::kNamePlaceholder)));
  EXPECT_THAT(module.source, Not(HasSubstr("@")));  // every placeholder filled
}

TEST(CudaCodegenTest, Stories260KLayersShareKernels) {
  const std::string path = kvjit::testing::SharedPath("models/stories260K.gguf");
  if (path.empty()) GTEST_SKIP() << "models/stories260K.gguf is not in the shared folder";
  absl::StatusOr<std::string> bytes = testing::CompiledExecutable(path, "f32");
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  const kvx::Executable& executable = Parse(*bytes);
  absl::StatusOr<CudaModuleSpec> module = GenerateCudaModule(executable);
  ASSERT_TRUE(module.ok()) << module.status();
  const auto& instructions = *executable.program()->instructions();
  ASSERT_EQ(module->instructions.size(), instructions.size());
  ExpectLaunchesNameKernels(*module);
  // The five layers' instructions differ only in their buffers, which come
  // at run time: each kind of kernel is generated once. Cut at each
  // KvWrite, the program's middle pieces (a layer's end and the next one's
  // start) launch only kernels that the first piece launches.
  std::vector<std::set<uint32_t>> kernels_per_piece;
  for (size_t i = 0; i < instructions.size(); ++i) {
    if (instructions[i]->op() == kvx::OpCode::KvWrite) kernels_per_piece.emplace_back();
    if (kernels_per_piece.empty()) continue;
    for (const PathSpec* path : {&module->instructions[i].decode, &module->instructions[i].prefill}) {
      for (const auto* launches : {&path->launches, &path->epilogue}) {
        for (const LaunchSpec& launch : *launches) kernels_per_piece.back().insert(launch.kernel);
      }
    }
  }
  ASSERT_EQ(kernels_per_piece.size(), 5u);
  for (size_t piece = 1; piece + 1 < kernels_per_piece.size(); ++piece) {
    EXPECT_TRUE(std::includes(kernels_per_piece[0].begin(), kernels_per_piece[0].end(),
                              kernels_per_piece[piece].begin(), kernels_per_piece[piece].end()))
        << "piece " << piece << " launches a kernel of its own";
  }
  EXPECT_LT(module->kernel_names.size(), instructions.size() / 2);
  int attention_kernels = 0;
  for (const std::string& name : module->kernel_names) {
    attention_kernels += name.find("attention_decode") != std::string::npos;
  }
  EXPECT_EQ(attention_kernels, 1);
  EXPECT_EQ(module->prefill_min_rows, kDefaultPrefillMinRows);

  for (size_t i = 0; i < instructions.size(); ++i) {
    const kvx::Instruction& instruction = *instructions[i];
    const InstructionSpec& spec = module->instructions[i];
    SCOPED_TRACE(absl::StrCat("instruction ", i, " ", kvx::EnumNameOpCode(instruction.op())));
    switch (instruction.op()) {
      case kvx::OpCode::Linear: {
        const kvx::Weight* weight =
            executable.weights()->Get(instruction.inputs()->Get(1)->index());
        EXPECT_FALSE(spec.decode.gemm.has_value());
        ASSERT_TRUE(spec.prefill.gemm.has_value());
        EXPECT_EQ(spec.prefill.gemm->n, weight->shape()->Get(0));
        EXPECT_EQ(spec.prefill.gemm->k, weight->shape()->Get(1));
        EXPECT_EQ(spec.prefill.gemm->activation_offset % 256, 0u);
        EXPECT_GE(spec.prefill.gemm->activation_offset,
                  uint64_t{spec.prefill.gemm->n} * spec.prefill.gemm->k * 2);
        EXPECT_EQ(spec.prefill.scratch_fixed_bytes, spec.prefill.gemm->activation_offset);
        EXPECT_EQ(spec.prefill.launches.size(), 2u);
        break;
      }
      case kvx::OpCode::KvAttention:
        EXPECT_EQ(spec.decode.launches.size(), 2u);  // split-K, then the reduce
        EXPECT_FALSE(spec.decode.scratch_bytes.empty());
        EXPECT_EQ(spec.decode.launches[0].grid_y.size(), 1u);
        EXPECT_EQ(spec.decode.launches[0].grid_y[0].kind(), kvx::DimKind::MaxBlocks);
        EXPECT_EQ(spec.prefill.launches.size(), 1u);
        EXPECT_TRUE(spec.prefill.scratch_bytes.empty());
        break;
      default:
        EXPECT_FALSE(spec.decode.gemm || spec.prefill.gemm);
        EXPECT_LE(spec.decode.launches.size(), 1u);
        break;
    }
  }
  // Constants are baked in: stories260K's rms_norm epsilon, as an exact literal.
  EXPECT_THAT(module->source, HasSubstr(FloatLiteral(executable.config()->rms_norm_eps())));
}

TEST(CudaCodegenTest, SyntheticProgramReachesEveryVariant) {
  const std::string bytes = testing::SyntheticExecutable(kvx::StorageType::F16);
  absl::StatusOr<CudaModuleSpec> module = GenerateCudaModule(Parse(bytes));
  ASSERT_TRUE(module.ok()) << module.status();
  ExpectLaunchesNameKernels(*module);
  for (const char* dequant : {"dequant_f32(", "dequant_f16(", "dequant_bf16(", "dequant_q8_0(",
                              "dequant_q4_0(", "dequant_q4_1(", "dequant_q5_0(", "dequant_q5_1(",
                              "dequant_q4_k(", "dequant_q5_k(", "dequant_q6_k("}) {
    // Once in the prelude's definition, and at least once in a kernel.
    const std::string& source = module->source;
    const size_t first = source.find(dequant);
    ASSERT_NE(first, std::string::npos) << dequant;
    EXPECT_NE(source.find(dequant, first + 1), std::string::npos) << dequant << " is never called";
  }
  for (const char* piece :
       {"gelu_tanh(step", "gelu_erf(step", "silu(step", "* 0x1p-1f",
        "Rope (neox): rotary_dim 64 of head_dim 80", "Rope (interleaved)", "scaling Llama3",
        "scaling Linear", "half_to_float(static_cast<const uint16_t*>", "bf16_to_float(",
        "kvjit_linear_add_bias", "store_kv_f16(key_slot, i, key[i])", "kvjit_attention_prefill"}) {
    EXPECT_THAT(module->source, HasSubstr(piece));
  }
  // The Linear over logits rows chooses its path by L, the others by T.
  const InstructionSpec& logits_head = module->instructions[12];
  ASSERT_EQ(logits_head.rows.size(), 1u);
  EXPECT_EQ(logits_head.rows[0].kind(), kvx::DimKind::LogitsRows);
  EXPECT_EQ(logits_head.prefill.epilogue.size(), 1u);  // its bias
}

TEST(CudaCodegenTest, GenerationIsDeterministic) {
  const std::string bytes = testing::SyntheticExecutable(kvx::StorageType::F32);
  absl::StatusOr<CudaModuleSpec> first = GenerateCudaModule(Parse(bytes));
  absl::StatusOr<CudaModuleSpec> second = GenerateCudaModule(Parse(bytes));
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_EQ(first->source, second->source);
  EXPECT_EQ(first->kernel_names, second->kernel_names);
}

// Each KV cache type is written and read by its own device functions
// (device/KvCache.cuh), keys and values apart; rotated caches rotate the
// written rows, the queries and the outputs; q8_0 and q4_0 keys take the
// query rounded to q8_0.
TEST(CudaCodegenTest, EveryCacheTypeHasItsKernels) {
  using kvx::StorageType;
  struct Case {
    testing::SyntheticCache cache;
    std::vector<std::string> pieces;
  };
  const std::vector<Case> cases = {
      {{StorageType::BF16, StorageType::BF16, 80, 0, 0},
       {"store_kv_bf16(key_slot, i, key[i])", "store_kv_bf16(value_slot, i, value[i])",
        "return load_kv_bf16(head, d);", "constexpr bool kQuantizeQuery = false;"}},
      {{StorageType::Q8_0, StorageType::F16, 128, 128, 0},
       {"store_block_q8_0(key_slot + b * 34, row[b * 32 + lane], lane)",
        "hadamard_shared(row, kRow, 128, kKeyRotationScale)",
        "constexpr float kKeyRotationScale = 0x1.6a09e6p-4f;", "store_kv_f16(value_slot, i, value[i])",
        "constexpr uint64_t kKeySlotStride = 272ull", "constexpr uint64_t kValueSlotStride = 512ull",
        "constexpr int kKeyRotation = 128;", "return load_kv_q8_0(head, d);",
        "constexpr bool kQuantizeQuery = true;", "*x = round_q8_0(*x);",
        "q[i][c] = round_q8_0(q[i][c]);",
        "return load_kv_f16(head, d);"}},
      {{StorageType::Q4_0, StorageType::F8_E4M3, 64, 64, 64},
       {"store_block_q4_0(key_slot + b * 18", "store_block_f8_e4m3(value_slot + b * 34",
        "hadamard_shared(row, kRow, 64, kKeyRotationScale)",
        "hadamard_shared(row, kRow, 64, kValueRotationScale)",
        "hadamard_shared(rotated, kHeadDim, 64, 0x1p-3f)",
        "hadamard_lanes<kValueRotation, kDimsPerLane>(result, kValueRotationScale)",
        "return load_kv_q4_0(head, d);", "return load_kv_f8_e4m3(head, d);"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(kvx::KvCacheTypesName(c.cache.key_type, c.cache.value_type));
    const std::string bytes = testing::SyntheticExecutable(c.cache);
    absl::StatusOr<CudaModuleSpec> module = GenerateCudaModule(Parse(bytes));
    ASSERT_TRUE(module.ok()) << module.status();
    for (const std::string& piece : c.pieces) EXPECT_THAT(module->source, HasSubstr(piece));
  }
}

TEST(CudaCodegenTest, CacheTheKernelsCannotKeepIsNamed) {
  using kvx::StorageType;
  // q8_0 blocks of 32 in heads of 80.
  absl::StatusOr<CudaModuleSpec> module = GenerateCudaModule(
      Parse(testing::SyntheticExecutable({StorageType::Q8_0, StorageType::F16, 80, 0, 0})));
  ASSERT_FALSE(module.ok());
  EXPECT_EQ(module.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(module.status().message(), HasSubstr("(KvWrite)"));
  EXPECT_THAT(module.status().message(),
              HasSubstr("a cache of q8_0 keys stores each head in blocks of 32 elements; head_dim 80 "
                        "is not a multiple of 32"));
  // Not a cache type at all.
  module = GenerateCudaModule(
      Parse(testing::SyntheticExecutable({StorageType::Q4_1, StorageType::F16, 64, 0, 0})));
  ASSERT_FALSE(module.ok());
  EXPECT_EQ(module.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(module.status().message(),
              HasSubstr("the CUDA kernels keep the KV cache in f32, f16, bf16, q8_0, q4_0, f8_e4m3, "
                        "not Q4_1 keys and F16 values"));
  // A rotation that is not a power of two dividing head_dim.
  module = GenerateCudaModule(
      Parse(testing::SyntheticExecutable({StorageType::Q8_0, StorageType::Q8_0, 64, 48, 0})));
  ASSERT_FALSE(module.ok());
  EXPECT_THAT(module.status().message(), HasSubstr("rotations in blocks of 48 (keys) and 0 (values)"));
}

TEST(CudaCodegenTest, CopyInPlaceLaunchesNothing) {
  flatbuffers::FlatBufferBuilder b;
  std::vector<kvx::Dim> flat = {kvx::Dim(kvx::DimKind::Tokens, 0),
                                kvx::Dim(kvx::DimKind::Static, 8)};
  std::vector<kvx::Dim> split = {kvx::Dim(kvx::DimKind::Tokens, 0),
                                 kvx::Dim(kvx::DimKind::Static, 2),
                                 kvx::Dim(kvx::DimKind::Static, 4)};
  auto in = kvx::CreateTensorRefDirect(b, kvx::BufferKind::Arena, 0, 64, &flat);
  auto out = kvx::CreateTensorRefDirect(b, kvx::BufferKind::Arena, 0, 64, &split);
  std::vector<flatbuffers::Offset<kvx::TensorRef>> inputs = {in}, outputs = {out};
  std::vector<flatbuffers::Offset<kvx::Instruction>> instructions = {
      kvx::CreateInstructionDirect(b, kvx::OpCode::Copy, &inputs, &outputs)};
  auto program = kvx::CreateProgramDirect(b, &instructions, out, 4096, 8);
  auto kv = kvx::CreateKvLayout(b, 1, 1, 8, 16, kvx::StorageType::F32, 1024, 1024, 512, 32, 4,
                                kvx::StorageType::F32, 32);
  std::vector<flatbuffers::Offset<kvx::Weight>> weights;
  auto root = kvx::CreateExecutableDirect(b, 0, nullptr, kvx::CreateModelConfigDirect(b), 0,
                                          nullptr, &weights, kv, program);
  kvx::FinishExecutableBuffer(b, root);
  absl::StatusOr<CudaModuleSpec> module =
      GenerateCudaModule(*kvx::GetExecutable(b.GetBufferPointer()));
  ASSERT_TRUE(module.ok()) << module.status();
  ASSERT_EQ(module->instructions.size(), 1u);
  EXPECT_TRUE(module->instructions[0].decode.launches.empty());
  EXPECT_TRUE(module->instructions[0].prefill.launches.empty());
  EXPECT_TRUE(module->kernel_names.empty());
}

}  // namespace
}  // namespace kvjit::codegen::cuda
