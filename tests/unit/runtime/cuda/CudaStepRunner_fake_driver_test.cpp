// The CUDA step runner's orchestration, checked on any machine against a
// stand-in driver (FakeCudaDriver.h) that records kernel launches instead of
// running them: which kernels run in which order with which grids, the
// buffers and sizes every kernel gets, the weights uploaded byte for byte,
// the padding and replay of decode graphs, block copies, and the errors of
// failing calls. The kernels' numbers are the GPU tests' business.

#include <dlfcn.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "codegen/ExecutableWriter.h"
#include "codegen/driver/Compiler.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/cuda/CollectiveLayout.h"
#include "runtime/cuda/CudaStepRunner.h"
#include "runtime/dist/DeviceCommunicator.h"
#include "runtime/exec/OpTable.h"
#include "runtime/generation/RunnerFactory.h"
#include "runtime/exec/Executable.h"
#include "runtime/schema/CudaLaunchAbi.h"
#include "tests/unit/common/TestPaths.h"
#include "tests/unit/runtime/cuda/FakeCudaDriver.h"

namespace kvjit::cuda {
namespace {

using ::testing::HasSubstr;

// Before any test asks for the driver.
const bool kUsesTheFakeDriver = [] {
  return ::setenv("KVJIT_CUDA_DRIVER", KVJIT_FAKE_CUDA_DRIVER, /*overwrite=*/1) == 0;
}();

cuda_abi::LaunchArgs ArgsOf(const FakeCudaLaunch& launch) {
  cuda_abi::LaunchArgs args;
  std::memcpy(&args, launch.args, sizeof(args));
  return args;
}

const int32_t* Ints(void* pointer) { return static_cast<const int32_t*>(pointer); }

class CudaStepRunnerFakeDriverTest : public ::testing::Test {
 protected:
  static constexpr int64_t kBlocks = 16;

  void SetUp() override {
    ASSERT_TRUE(kUsesTheFakeDriver);
    const std::string model = testing::SharedPath("models/stories260K.gguf");
    if (model.empty()) GTEST_SKIP() << "stories260K.gguf not found under $KVJIT_SHARED_DIR/models";
    executable_ = Compile(model, /*cuda_arch=*/90);
    ASSERT_NE(executable_, nullptr);
    block_size_ = executable_->kv_layout().block_size();
    FakeCuda_SetMemoryLimit(size_t{1} << 40);
    FakeCuda_FailLaunch(-1);
    auto runner = CudaStepRunner::Create(*executable_, kBlocks, CudaRunnerOptions());
    ASSERT_TRUE(runner.ok()) << runner.status();
    runner_ = *std::move(runner);
    FakeCuda_ClearLaunches();
  }

  // stories260K for the CUDA target, compiled once per architecture.
  static const runtime::Executable* Compile(const std::string& model, int arch) {
    static std::map<int, std::unique_ptr<runtime::Executable>> compiled;
    auto found = compiled.find(arch);
    if (found != compiled.end()) return found->second.get();
    codegen::CompileOptions options;
    options.target = "cuda";
    options.cuda_arch = arch;
    options.max_tokens_per_step = 64;
    // --verify would run the kernels on this test's recording driver, which
    // computes nothing.
    options.verification = codegen::Verification::kOff;
    const std::string kvx =
        (std::filesystem::temp_directory_path() /
         ("kvjit-fake-driver-" + std::to_string(::getpid()) + "-" + std::to_string(arch) + ".kvx"))
            .string();
    absl::Status status = codegen::CompileModel(model, kvx, options, nullptr);
    EXPECT_TRUE(status.ok()) << status;
    if (!status.ok()) return nullptr;
    auto executable = runtime::Executable::Load(kvx);
    std::filesystem::remove(kvx);
    std::filesystem::remove(codegen::SidecarPathFor(kvx));
    EXPECT_TRUE(executable.ok()) << executable.status();
    if (!executable.ok()) return nullptr;
    return (compiled[arch] = *std::move(executable)).get();
  }

  // `count` tokens of one sequence from position `first`, in blocks 3, 1, 2.
  runtime::StepInputs Step(int64_t first, int64_t count) const {
    const std::vector<int32_t> table = {3, 1, 2};
    runtime::StepInputs step;
    for (int64_t p = first; p < first + count; ++p) {
      step.tokens().push_back(static_cast<int32_t>(10 + p));
      step.positions().push_back(static_cast<int32_t>(p));
      step.slot_mapping().push_back(
          static_cast<int32_t>(table[p / block_size_] * block_size_ + p % block_size_));
    }
    step.seq_starts() = {0, static_cast<int32_t>(count)};
    step.context_lens() = {static_cast<int32_t>(first + count)};
    step.block_tables() = table;
    step.max_blocks = 3;
    step.logits_rows() = {static_cast<int32_t>(count - 1)};
    return step;
  }

  // The launches the program makes for a step of `sizes`, in order: each
  // instruction's path, as the runner must choose it.
  struct Expected {
    size_t instruction;
    const kvx::CudaLaunch* launch;
    const kvx::CudaPath* path;
  };
  std::vector<Expected> ExpectedLaunches(const runtime::StepSizes& sizes) const {
    std::vector<Expected> expected;
    const kvx::CudaModule& module = *executable_->cuda();
    for (size_t i = 0; i < module.instructions()->size(); ++i) {
      const kvx::CudaInstruction& instruction = *module.instructions()->Get(i);
      const kvx::CudaPath* path =
          runtime::SizeProduct(instruction.rows(), sizes) < module.prefill_min_rows()
              ? instruction.decode()
              : instruction.prefill();
      EXPECT_EQ(path->gemm(), nullptr) << "instruction " << i << " takes a GEMM path";
      if (path->launches() == nullptr) continue;
      for (const kvx::CudaLaunch* launch : *path->launches()) {
        if (runtime::SizeProduct(launch->grid_x(), sizes) == 0 ||
            runtime::SizeProduct(launch->grid_y(), sizes) == 0 ||
            runtime::SizeProduct(launch->grid_z(), sizes) == 0) {
          continue;
        }
        expected.push_back({i, launch, path});
      }
    }
    return expected;
  }

  // Checks the recorded launches from `first` on against the program for a
  // step of `sizes` whose inputs are `inputs`; returns the KV pool base the
  // layer-0 cache instructions got (0 when none).
  uintptr_t ExpectProgramLaunches(int first, const runtime::StepSizes& sizes,
                                  const runtime::StepInputs& inputs, bool from_graph) {
    const std::vector<Expected> expected = ExpectedLaunches(sizes);
    EXPECT_GT(expected.size(), executable_->program().instructions()->size() / 2);
    EXPECT_EQ(FakeCuda_LaunchCount() - first, static_cast<int>(expected.size()));
    const kvx::CudaModule& module = *executable_->cuda();
    const auto& program = *executable_->program().instructions();
    const kvx::KvLayout& kv = executable_->kv_layout();
    uintptr_t arena_base = 0;
    uintptr_t kv_base = 0;
    for (size_t j = 0; j < expected.size() && first + static_cast<int>(j) < FakeCuda_LaunchCount();
         ++j) {
      const FakeCudaLaunch& launch = *FakeCuda_Launch(first + static_cast<int>(j));
      const Expected& want = expected[j];
      const kvx::Instruction& instruction = *program[want.instruction];
      const std::string where =
          "launch " + std::to_string(j) + " (instruction " + std::to_string(want.instruction) + ")";
      EXPECT_STREQ(launch.kernel, module.kernels()->Get(want.launch->kernel())->name()->c_str())
          << where;
      EXPECT_EQ(launch.from_graph, from_graph ? 1 : 0) << where;
      EXPECT_EQ(launch.grid[0], runtime::SizeProduct(want.launch->grid_x(), sizes)) << where;
      EXPECT_EQ(launch.grid[1], runtime::SizeProduct(want.launch->grid_y(), sizes)) << where;
      EXPECT_EQ(launch.grid[2], runtime::SizeProduct(want.launch->grid_z(), sizes)) << where;
      EXPECT_EQ(launch.block[0], want.launch->block_threads()) << where;
      const cuda_abi::LaunchArgs args = ArgsOf(launch);
      EXPECT_EQ(args.tokens, sizes.tokens) << where;
      EXPECT_EQ(args.logits_rows, sizes.logits_rows) << where;
      EXPECT_EQ(args.sequences, sizes.sequences) << where;
      EXPECT_EQ(args.max_blocks, sizes.max_blocks) << where;
      const int inputs_count = static_cast<int>(instruction.inputs()->size());
      const int outputs_count = static_cast<int>(instruction.outputs()->size());
      int slot = 0;
      auto expect_arena = [&](const kvx::TensorRef& ref) {
        const uintptr_t pointer = reinterpret_cast<uintptr_t>(args.buffers[slot]);
        if (arena_base == 0) arena_base = pointer - ref.offset();
        EXPECT_EQ(pointer, arena_base + ref.offset()) << where << ", buffer " << slot;
      };
      for (const kvx::TensorRef* ref : *instruction.inputs()) {
        if (ref->kind() == kvx::BufferKind::Arena) {
          expect_arena(*ref);
        } else if (ref->kind() == kvx::BufferKind::Weight) {
          // Uploaded byte for byte.
          const absl::Span<const uint8_t> bytes = executable_->WeightBytes(ref->index());
          EXPECT_EQ(reinterpret_cast<uintptr_t>(args.buffers[slot]) % 16, 0u) << where;
          EXPECT_EQ(std::memcmp(args.buffers[slot], bytes.data(), bytes.size()), 0) << where;
        } else if (ref->kind() == kvx::BufferKind::Input &&
                   ref->index() == static_cast<uint32_t>(kvx::StepInput::Tokens)) {
          for (size_t t = 0; t < inputs.tokens().size(); ++t) {
            EXPECT_EQ(Ints(args.buffers[slot])[t], inputs.tokens()[t]) << where;
          }
        } else if (ref->kind() == kvx::BufferKind::Input &&
                   ref->index() == static_cast<uint32_t>(kvx::StepInput::SlotMapping)) {
          for (size_t t = 0; t < inputs.slot_mapping().size(); ++t) {
            EXPECT_EQ(Ints(args.buffers[slot])[t], inputs.slot_mapping()[t]) << where;
          }
        } else if (ref->kind() == kvx::BufferKind::Input &&
                   ref->index() == static_cast<uint32_t>(kvx::StepInput::BlockTables)) {
          for (size_t k = 0; k < inputs.block_tables().size(); ++k) {
            EXPECT_EQ(Ints(args.buffers[slot])[k], inputs.block_tables()[k]) << where;
          }
        }
        ++slot;
      }
      for (const kvx::TensorRef* ref : *instruction.outputs()) {
        expect_arena(*ref);
        ++slot;
      }
      void* kv_pool = args.buffers[cuda_abi::KvPoolBuffer(inputs_count, outputs_count)];
      const kvx::KvWriteParams* write = instruction.params_as_KvWriteParams();
      const kvx::KvAttentionParams* attention = instruction.params_as_KvAttentionParams();
      if (write != nullptr || attention != nullptr) {
        const uint32_t layer = write != nullptr ? write->layer() : attention->layer();
        const uintptr_t layer_offset = layer * kv.layer_stride_bytes();
        if (kv_base == 0) kv_base = reinterpret_cast<uintptr_t>(kv_pool) - layer_offset;
        EXPECT_EQ(reinterpret_cast<uintptr_t>(kv_pool), kv_base + layer_offset) << where;
      } else {
        EXPECT_EQ(kv_pool, nullptr) << where;
      }
      void* scratch = args.buffers[cuda_abi::ScratchBuffer(inputs_count, outputs_count)];
      EXPECT_EQ(scratch != nullptr, runtime::ScratchBytes(*want.path, sizes) > 0) << where;
      if (scratch != nullptr) {
        EXPECT_EQ(reinterpret_cast<uintptr_t>(scratch) % cuda_abi::kScratchAlignment, 0u);
      }
      for (int b = cuda_abi::ScratchBuffer(inputs_count, outputs_count) + 1;
           b < cuda_abi::kMaxLaunchBuffers; ++b) {
        EXPECT_EQ(args.buffers[b], nullptr) << where << ", buffer " << b;
      }
    }
    return kv_base;
  }

  const runtime::Executable* executable_ = nullptr;
  int64_t block_size_ = 0;
  std::unique_ptr<CudaStepRunner> runner_;
};

TEST_F(CudaStepRunnerFakeDriverTest, AStepLaunchesEveryInstructionsKernelsWithItsBuffers) {
  ASSERT_GT(executable_->cuda()->prefill_min_rows(), 5u);
  const runtime::StepInputs step = Step(0, 5);
  auto logits = runner_->Run(step);
  ASSERT_TRUE(logits.ok()) << logits.status();
  EXPECT_EQ(logits->size(), static_cast<size_t>(runner_->vocab_size()));
  ExpectProgramLaunches(0, {5, 1, 1, 3}, step, /*from_graph=*/false);
}

TEST_F(CudaStepRunnerFakeDriverTest, DecodeStepsReplayOneGraphOverPaddedInputs) {
  ASSERT_FALSE(runner_->graph_buckets().empty());
  ASSERT_TRUE(runner_->Run(Step(0, 5)).ok());
  // Three sequences decoding together take the bucket of 4.
  runtime::StepInputs step;
  step.tokens() = {7, 8, 9};
  step.positions() = {5, 2, 0};
  step.seq_starts() = {0, 1, 2, 3};
  step.context_lens() = {6, 3, 1};
  step.slot_mapping() = {static_cast<int32_t>(3 * block_size_ + 5),
                       static_cast<int32_t>(4 * block_size_ + 2),
                       static_cast<int32_t>(6 * block_size_)};
  step.block_tables() = {3, 4, 6};
  step.max_blocks = 1;
  step.logits_rows() = {0, 1, 2};
  const int64_t columns = std::min<int64_t>(
      (executable_->config().context_length() + block_size_ - 1) / block_size_, kBlocks);
  const runtime::StepInputs padded =
      PadDecodeStep(step, 4, columns, static_cast<int32_t>(kBlocks), block_size_);
  for (int run = 0; run < 2; ++run) {
    FakeCuda_ClearLaunches();
    auto logits = runner_->Run(step);
    ASSERT_TRUE(logits.ok()) << logits.status();
    EXPECT_EQ(logits->size(), 3 * static_cast<size_t>(runner_->vocab_size()));
    ExpectProgramLaunches(0, {4, 4, 4, columns}, padded, /*from_graph=*/true);
  }
  EXPECT_EQ(runner_->graphs_captured(), 1);
  EXPECT_EQ(runner_->graph_replays(), 1);
  EXPECT_EQ(FakeCuda_GraphsInstantiated() >= 1, true);
}

// A bucket serves every step of up to its many sequences, so each of its
// instructions takes the path a single sequence takes: padding must not move
// a real row onto the prefill path, which reduces in another order.
TEST_F(CudaStepRunnerFakeDriverTest, GraphBucketsTakeTheDecodePathsOfOneSequence) {
  ASSERT_FALSE(runner_->graph_buckets().empty());
  const int64_t largest = runner_->graph_buckets().back();
  const int64_t columns = std::min<int64_t>(
      (executable_->config().context_length() + block_size_ - 1) / block_size_, kBlocks);
  const kvx::CudaModule& module = *executable_->cuda();
  auto path_of = [&](const kvx::CudaInstruction& instruction, int64_t sequences) {
    const runtime::StepSizes sizes = {sequences, sequences, sequences, columns};
    return runtime::SizeProduct(instruction.rows(), sizes) < module.prefill_min_rows()
               ? instruction.decode()
               : instruction.prefill();
  };
  for (size_t i = 0; i < module.instructions()->size(); ++i) {
    const kvx::CudaInstruction& instruction = *module.instructions()->Get(i);
    EXPECT_EQ(path_of(instruction, largest), path_of(instruction, 1)) << "instruction " << i;
    EXPECT_EQ(path_of(instruction, largest)->gemm(), nullptr) << "instruction " << i;
  }
  // The next bucket would not serve: some instruction changes path or
  // needs cuBLAS there, or the step or the options end the buckets.
  const int64_t next = 2 * largest;
  if (next <= std::min<int64_t>(CudaRunnerOptions().largest_graph_batch,
                                runner_->max_tokens_per_step())) {
    bool changes = false;
    for (const kvx::CudaInstruction* instruction : *module.instructions()) {
      changes = changes || path_of(*instruction, next) != path_of(*instruction, 1) ||
                path_of(*instruction, next)->gemm() != nullptr;
    }
    EXPECT_TRUE(changes) << "bucket " << next << " would serve too";
  }
}

TEST_F(CudaStepRunnerFakeDriverTest, WithoutGraphsDecodeStepsLaunchOneByOne) {
  CudaRunnerOptions options;
  options.largest_graph_batch = 0;
  auto runner = CudaStepRunner::Create(*executable_, kBlocks, options);
  ASSERT_TRUE(runner.ok()) << runner.status();
  FakeCuda_ClearLaunches();
  const runtime::StepInputs step = Step(5, 1);
  ASSERT_TRUE((*runner)->Run(step).ok());
  ExpectProgramLaunches(0, {1, 1, 1, 3}, step, /*from_graph=*/false);
  EXPECT_EQ((*runner)->graphs_captured(), 0);
}

// What a profiler would keep of each step: its instructions' spans.
class SpanRecorder : public runtime::StepObserver {
 public:
  void StepBegan(const runtime::StepInputs& inputs) override {
    ++began;
    spans.clear();
  }
  void InstructionRan(size_t index, Clock::time_point start, Clock::time_point end) override {
    spans.push_back({index, std::chrono::duration<double, std::milli>(end - start).count()});
  }
  void StepEnded() override { ++ended; }

  struct Span {
    size_t index;
    double milliseconds;
  };
  int began = 0;
  int ended = 0;
  std::vector<Span> spans;
};

TEST_F(CudaStepRunnerFakeDriverTest, AnObserverSeesEachInstructionTimedByItsEvents) {
  constexpr float kMillisecondsPerLaunch = 0.25f;
  FakeCuda_SetMillisecondsPerLaunch(kMillisecondsPerLaunch);
  SpanRecorder recorder;
  ASSERT_TRUE(runner_->SetObserver(&recorder).ok());
  const size_t instructions = executable_->program().instructions()->size();
  // A prefill, then a decode step, which unobserved would replay a graph.
  const std::vector<runtime::StepInputs> steps = {Step(0, 5), Step(5, 1)};
  for (size_t s = 0; s < steps.size(); ++s) {
    FakeCuda_ClearLaunches();
    ASSERT_TRUE(runner_->Run(steps[s]).ok());
    std::vector<int> launches(instructions, 0);
    for (const Expected& expected : ExpectedLaunches(runtime::SizesOf(steps[s]))) {
      ++launches[expected.instruction];
    }
    EXPECT_EQ(recorder.began, static_cast<int>(s + 1));
    EXPECT_EQ(recorder.ended, static_cast<int>(s + 1));
    ASSERT_EQ(recorder.spans.size(), instructions) << "step " << s;
    for (size_t i = 0; i < instructions; ++i) {
      EXPECT_EQ(recorder.spans[i].index, i);
      EXPECT_NEAR(recorder.spans[i].milliseconds, launches[i] * kMillisecondsPerLaunch, 1e-6)
          << "step " << s << ", instruction " << i;
    }
    for (int l = 0; l < FakeCuda_LaunchCount(); ++l) EXPECT_FALSE(FakeCuda_Launch(l)->from_graph);
  }
  EXPECT_EQ(runner_->graph_replays(), 0);

  // Unobserved again, steps report nothing.
  ASSERT_TRUE(runner_->SetObserver(nullptr).ok());
  ASSERT_TRUE(runner_->Run(Step(6, 1)).ok());
  EXPECT_EQ(recorder.began, 2);
  FakeCuda_SetMillisecondsPerLaunch(0);
}

TEST_F(CudaStepRunnerFakeDriverTest, CopyBlockCopiesTheWholeBlock) {
  const runtime::StepInputs step = Step(0, 5);
  ASSERT_TRUE(runner_->Run(step).ok());
  const uintptr_t kv_base = ExpectProgramLaunches(0, {5, 1, 1, 3}, step, false);
  ASSERT_NE(kv_base, 0u);
  const uint64_t block_bytes = executable_->kv_layout().bytes_per_block();
  auto* pool = reinterpret_cast<uint8_t*>(kv_base);
  for (uint64_t i = 0; i < block_bytes; ++i)
    pool[2 * block_bytes + i] = static_cast<uint8_t>(i * 7);
  ASSERT_TRUE(runner_->CopyBlock(2, 5).ok());
  EXPECT_EQ(std::memcmp(pool + 5 * block_bytes, pool + 2 * block_bytes, block_bytes), 0);
  EXPECT_EQ(runner_->CopyBlock(-1, 5).code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(runner_->CopyBlock(2, kBlocks).code(), absl::StatusCode::kOutOfRange);
}

TEST_F(CudaStepRunnerFakeDriverTest, AFailingLaunchNamesTheInstructionAndTheKernel) {
  FakeCuda_FailLaunch(3);
  auto logits = runner_->Run(Step(0, 5));
  FakeCuda_FailLaunch(-1);
  ASSERT_FALSE(logits.ok());
  const std::vector<Expected> expected = ExpectedLaunches({5, 1, 1, 3});
  const kvx::CudaModule& module = *executable_->cuda();
  EXPECT_THAT(logits.status().message(),
              HasSubstr("instruction " + std::to_string(expected[3].instruction) + " ("));
  EXPECT_THAT(logits.status().message(),
              HasSubstr("kernel '" +
                        module.kernels()->Get(expected[3].launch->kernel())->name()->str() + "'"));
  EXPECT_THAT(logits.status().message(), HasSubstr("CUDA_ERROR_LAUNCH_FAILED"));
  // The next step runs.
  EXPECT_TRUE(runner_->Run(Step(0, 5)).ok());
}

TEST_F(CudaStepRunnerFakeDriverTest, ABadStepIsRefusedBeforeAnyLaunch) {
  runtime::StepInputs step = Step(0, 5);
  step.block_tables()[0] = static_cast<int32_t>(kBlocks);
  auto logits = runner_->Run(step);
  ASSERT_FALSE(logits.ok());
  EXPECT_THAT(logits.status().message(), HasSubstr("outside the pool's 16 blocks"));
  EXPECT_EQ(FakeCuda_LaunchCount(), 0);
}

TEST_F(CudaStepRunnerFakeDriverTest, APrefillStepTakesTheGemmPathThroughCublas) {
  // cuBLAS runs on the real driver: where there is one, it would take the
  // stand-in's host pointers for device memory.
  if (void* real = ::dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL)) {
    ::dlclose(real);
    GTEST_SKIP() << "this machine has an NVIDIA driver, which cuBLAS would use";
  }
  const int64_t rows = executable_->cuda()->prefill_min_rows();
  if (rows > runner_->max_tokens_per_step()) GTEST_SKIP() << "no prefill path below 64 tokens";
  // Without a driver, cuBLAS cannot start, and the step says so.
  auto logits = runner_->Run(Step(0, std::min<int64_t>(rows, 3 * block_size_)));
  ASSERT_FALSE(logits.ok());
  EXPECT_THAT(logits.status().message(), HasSubstr("cublasCreate failed"));
  EXPECT_THAT(logits.status().message(), HasSubstr("(Linear)"));
}

TEST_F(CudaStepRunnerFakeDriverTest, OutOfMemoryNamesTheRegions) {
  FakeCuda_SetMemoryLimit(1 << 20);
  auto runner = CudaStepRunner::Create(*executable_, 4096, CudaRunnerOptions());
  FakeCuda_SetMemoryLimit(size_t{1} << 40);
  ASSERT_FALSE(runner.ok());
  EXPECT_EQ(runner.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(runner.status().message(), HasSubstr("Fake GPU"));
  EXPECT_THAT(runner.status().message(), HasSubstr("weights"));
  EXPECT_THAT(runner.status().message(), HasSubstr("KV cache"));
}

TEST_F(CudaStepRunnerFakeDriverTest, TheCubinLoadsOnItsArchitectureAndPtxElsewhere) {
  EXPECT_EQ(FakeCuda_LastModuleImage(), 'c');  // sm_90 kernels on the sm_90 stand-in
  const runtime::Executable* sm80 =
      Compile(testing::SharedPath("models/stories260K.gguf"), /*cuda_arch=*/80);
  ASSERT_NE(sm80, nullptr);
  auto runner = CudaStepRunner::Create(*sm80, 4, CudaRunnerOptions());
  ASSERT_TRUE(runner.ok()) << runner.status();
  EXPECT_EQ(FakeCuda_LastModuleImage(), 'p');
}

TEST(CudaStepRunnerRefusalTest, AnExecutableWithoutCudaKernelsIsRefused) {
  ASSERT_TRUE(kUsesTheFakeDriver);
  const std::string model = testing::SharedPath("models/stories260K.gguf");
  if (model.empty()) GTEST_SKIP() << "stories260K.gguf not found under $KVJIT_SHARED_DIR/models";
  codegen::CompileOptions options;
  options.target = "cpu";
  options.max_tokens_per_step = 64;
  const std::string kvx = (std::filesystem::temp_directory_path() /
                           ("kvjit-fake-driver-" + std::to_string(::getpid()) + "-cpu.kvx"))
                              .string();
  ASSERT_TRUE(codegen::CompileModel(model, kvx, options, nullptr).ok());
  auto executable = runtime::Executable::Load(kvx);
  std::filesystem::remove(kvx);
  std::filesystem::remove(codegen::SidecarPathFor(kvx));
  ASSERT_TRUE(executable.ok()) << executable.status();
  auto runner = CudaStepRunner::Create(**executable, 8, CudaRunnerOptions());
  ASSERT_FALSE(runner.ok());
  EXPECT_EQ(runner.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(runner.status().message(), HasSubstr("compile the model with --target cuda"));
  EXPECT_EQ(runtime::DefaultDevice(**executable), "cpu");
  auto through_factory = runtime::CreateStepRunner(**executable, 8, 1, "cuda:0");
  ASSERT_FALSE(through_factory.ok());
  EXPECT_THAT(through_factory.status().message(), HasSubstr("--target cuda"));
  EXPECT_TRUE(runtime::CreateStepRunner(**executable, 8, 1, "cpu").ok());
}


// ---- Tensor-parallel ranks: collectives through a device communicator ----

// A DeviceCommunicator that records each call, with the number of kernel
// launches the fake driver had recorded when it came, instead of moving data.
class RecordingCommunicator final : public runtime::dist::DeviceCommunicator {
 public:
  struct Call {
    kvx::OpCode op;
    const void* source;  // AllGather's local shard; AllReduce's values
    void* destination;   // AllGather's gathered blocks; AllReduce's values
    int64_t count;
    void* stream;
    int launches_before;
  };

  RecordingCommunicator(int rank, int size) : rank_(rank), size_(size) {}

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  absl::Status AllReduceSum(float* values, int64_t count, void* stream) override {
    calls.push_back({kvx::OpCode::AllReduce, values, values, count, stream, FakeCuda_LaunchCount()});
    return absl::OkStatus();
  }
  absl::Status AllGather(const float* local, int64_t count_per_rank, float* gathered,
                         void* stream) override {
    calls.push_back(
        {kvx::OpCode::AllGather, local, gathered, count_per_rank, stream, FakeCuda_LaunchCount()});
    return absl::OkStatus();
  }
  absl::Status Broadcast(void*, int64_t, int, void*) override {
    return absl::UnimplementedError("the runner broadcasts nothing");
  }
  absl::Status CheckHealth() override { return absl::OkStatus(); }
  absl::Status AwaitStream(const std::function<absl::StatusOr<bool>()>& stream_finished,
                           absl::Duration timeout) override {
    ++awaits;
    awaited_timeout = timeout;
    absl::StatusOr<bool> finished = stream_finished();
    if (!finished.ok()) return finished.status();
    return *finished ? absl::OkStatus() : absl::DeadlineExceededError("the stream never finished");
  }

  std::vector<Call> calls;
  int awaits = 0;
  absl::Duration awaited_timeout;

 private:
  int rank_;
  int size_;
};

// stories260K split over 3 ranks for the CUDA target: its logits head is
// gathered from 170, 171 and 171 vocabulary columns, so rank 1's shard is
// padded for NCCL's equal counts.
class TensorParallelFakeDriverTest : public ::testing::Test {
 protected:
  static constexpr int kRanks = 3;
  static constexpr int kRank = 1;
  static constexpr int64_t kBlocks = 16;

  void SetUp() override {
    ASSERT_TRUE(kUsesTheFakeDriver);
    const std::string model = testing::SharedPath("models/stories260K.gguf");
    if (model.empty()) GTEST_SKIP() << "stories260K.gguf not found under $KVJIT_SHARED_DIR/models";
    executable_ = Compile(model);
    ASSERT_NE(executable_, nullptr);
    FakeCuda_SetMemoryLimit(size_t{1} << 40);
    FakeCuda_FailLaunch(-1);
  }

  static const runtime::Executable* Compile(const std::string& model) {
    static std::unique_ptr<runtime::Executable> compiled;
    if (compiled != nullptr) return compiled.get();
    codegen::CompileOptions options;
    options.target = "cuda";
    options.cuda_arch = 90;
    options.tensor_parallel = kRanks;
    options.max_tokens_per_step = 64;
    options.verification = codegen::Verification::kOff;
    const std::string kvx = (std::filesystem::temp_directory_path() /
                             ("kvjit-fake-driver-tp-" + std::to_string(::getpid()) + ".kvx"))
                                .string();
    absl::Status status = codegen::CompileModel(model, kvx, options, nullptr);
    EXPECT_TRUE(status.ok()) << status;
    if (!status.ok()) return nullptr;
    runtime::LoadOptions load;
    load.tensor_parallel_rank = kRank;
    auto executable = runtime::Executable::Load(kvx, load);
    EXPECT_TRUE(executable.ok()) << executable.status();
    if (!executable.ok()) return nullptr;
    compiled = *std::move(executable);
    return compiled.get();
  }

  const runtime::Executable* executable_ = nullptr;
};

TEST_F(TensorParallelFakeDriverTest, CollectivesRunBetweenTheLaunchesOnTheRunnersStream) {
  auto owned = std::make_unique<RecordingCommunicator>(kRank, kRanks);
  RecordingCommunicator& communicator = *owned;
  CudaRunnerOptions options;
  options.collective_timeout = absl::Seconds(7);
  auto created = CudaStepRunner::Create(*executable_, kBlocks, options, std::move(owned));
  ASSERT_TRUE(created.ok()) << created.status();
  CudaStepRunner& runner = **created;
  // Collectives are not captured into graphs (CudaStepRunner.cpp says why).
  EXPECT_TRUE(runner.graph_buckets().empty());
  const int awaits_at_creation = communicator.awaits;
  EXPECT_GE(awaits_at_creation, 1) << "creation waits through the communicator too";

  for (const int64_t tokens : {int64_t{1}, int64_t{5}}) {
    SCOPED_TRACE(tokens == 1 ? "a decode step" : "a prefill step");
    communicator.calls.clear();
    FakeCuda_ClearLaunches();
    const int block_size = static_cast<int>(executable_->kv_layout().block_size());
    runtime::StepInputs step;
    for (int32_t p = 0; p < tokens; ++p) {
      step.tokens().push_back(10 + p);
      step.positions().push_back(p);
      step.slot_mapping().push_back(2 * block_size + p);
    }
    step.seq_starts() = {0, static_cast<int32_t>(tokens)};
    step.context_lens() = {static_cast<int32_t>(tokens)};
    step.block_tables() = {2};
    step.max_blocks = 1;
    step.logits_rows() = {static_cast<int32_t>(tokens - 1)};
    const int awaits_before = communicator.awaits;
    absl::StatusOr<absl::Span<const float>> logits = runner.Run(step);
    ASSERT_TRUE(logits.ok()) << logits.status();
    EXPECT_EQ(communicator.awaits, awaits_before + 1) << "each step waits once, bounded";
    EXPECT_EQ(communicator.awaited_timeout, absl::Seconds(7));
    EXPECT_EQ(runner.graph_replays(), 0);

    // Walk the program as the runner must: each instruction's launches,
    // then (a collective's) the call, then its epilogue.
    const runtime::StepSizes sizes = runtime::SizesOf(step);
    const kvx::CudaModule& module = *executable_->cuda();
    const auto& program = *executable_->program().instructions();
    int launch = 0;
    size_t call = 0;
    int all_gathers = 0;
    auto expect_launches = [&](const auto* launches, size_t instruction) {
      if (launches == nullptr) return;
      for (const kvx::CudaLaunch* expected : *launches) {
        if (runtime::SizeProduct(expected->grid_x(), sizes) == 0) continue;
        ASSERT_LT(launch, FakeCuda_LaunchCount()) << "instruction " << instruction;
        EXPECT_STREQ(FakeCuda_Launch(launch)->kernel,
                     module.kernels()->Get(expected->kernel())->name()->c_str())
            << "instruction " << instruction;
        ++launch;
      }
    };
    uintptr_t arena_base = 0;
    for (size_t i = 0; i < program.size(); ++i) {
      const kvx::Instruction& instruction = *program[i];
      const kvx::CudaInstruction& cuda = *module.instructions()->Get(i);
      const kvx::CudaPath& path =
          runtime::SizeProduct(cuda.rows(), sizes) < module.prefill_min_rows() ? *cuda.decode()
                                                                               : *cuda.prefill();
      const int first_launch = launch;
      expect_launches(path.launches(), i);
      if (i == 0) {
        // The embedding's output gives the arena's base.
        const cuda_abi::LaunchArgs args = ArgsOf(*FakeCuda_Launch(0));
        arena_base = reinterpret_cast<uintptr_t>(args.buffers[instruction.inputs()->size()]) -
                     instruction.outputs()->Get(0)->offset();
      }
      if (!IsCollective(instruction.op())) {
        if (path.gemm() == nullptr) expect_launches(path.epilogue(), i);
        continue;
      }
      ASSERT_LT(call, communicator.calls.size()) << "instruction " << i << " made no call";
      const RecordingCommunicator::Call& made = communicator.calls[call++];
      EXPECT_EQ(made.op, instruction.op()) << "instruction " << i;
      EXPECT_EQ(made.launches_before, launch) << "instruction " << i << ": out of order";
      EXPECT_EQ(made.stream, static_cast<void*>(runner.device().stream()));
      const kvx::TensorRef& out = *instruction.outputs()->Get(0);
      if (instruction.op() == kvx::OpCode::AllReduce) {
        EXPECT_EQ(reinterpret_cast<uintptr_t>(made.destination), arena_base + out.offset())
            << "instruction " << i;
        EXPECT_EQ(made.count, runtime::Extent(out, 0, sizes) * runtime::Extent(out, 1, sizes) *
                                  runtime::Extent(out, 2, sizes))
            << "instruction " << i;
      } else {
        ++all_gathers;
        // Rank 1's 170 columns, padded to 171 by the pack kernel, which
        // writes the shard the call sends.
        const int64_t rows = runtime::Extent(*instruction.inputs()->Get(0), 0, sizes);
        EXPECT_EQ(made.count, rows * 171) << "instruction " << i;
        ASSERT_EQ(launch - first_launch, 1) << "instruction " << i << ": one pack launch";
        const cuda_abi::LaunchArgs pack = ArgsOf(*FakeCuda_Launch(first_launch));
        const void* scratch = pack.buffers[cuda_abi::ScratchBuffer(1, 1)];
        ASSERT_NE(scratch, nullptr);
        EXPECT_EQ(made.source, scratch);
        EXPECT_EQ(made.destination, static_cast<const char*>(scratch) + rows * 171 * 4);
        EXPECT_THAT(FakeCuda_Launch(first_launch)->kernel, HasSubstr("all_gather_pack"));
        ASSERT_LT(launch, FakeCuda_LaunchCount());
        EXPECT_THAT(FakeCuda_Launch(launch)->kernel, HasSubstr("all_gather_interleave"));
        const cuda_abi::LaunchArgs interleave = ArgsOf(*FakeCuda_Launch(launch));
        EXPECT_EQ(interleave.buffers[cuda_abi::ScratchBuffer(1, 1)], scratch);
        EXPECT_EQ(reinterpret_cast<uintptr_t>(interleave.buffers[1]), arena_base + out.offset());
      }
      expect_launches(path.epilogue(), i);
    }
    EXPECT_EQ(launch, FakeCuda_LaunchCount());
    EXPECT_EQ(call, communicator.calls.size());
    EXPECT_GE(call, 2u * executable_->config().num_layers()) << "two all-reduces per layer";
    EXPECT_EQ(all_gathers, 1) << "the logits head";
  }
}

TEST_F(TensorParallelFakeDriverTest, ARanksProgramWithoutACommunicatorIsRefused) {
  auto runner = CudaStepRunner::Create(*executable_, kBlocks, CudaRunnerOptions());
  ASSERT_FALSE(runner.ok());
  EXPECT_EQ(runner.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(runner.status().message(), HasSubstr("(AllReduce) runs between the GPUs of 3"));
  EXPECT_THAT(runner.status().message(), HasSubstr("mpirun -np 3"));
}

TEST_F(TensorParallelFakeDriverTest, ACommunicatorOfAnotherRankIsRefused) {
  auto runner = CudaStepRunner::Create(*executable_, kBlocks, CudaRunnerOptions(),
                                       std::make_unique<RecordingCommunicator>(0, kRanks));
  ASSERT_FALSE(runner.ok());
  EXPECT_THAT(runner.status().message(),
              HasSubstr("holds the program of rank 1 of 3, and the device communicator is rank 0 "
                        "of 3"));
}

}  // namespace
}  // namespace kvjit::cuda
