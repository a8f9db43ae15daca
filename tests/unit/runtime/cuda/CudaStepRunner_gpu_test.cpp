// The CUDA step runner against the CPU one, on the same executable (one
// .kvx carries the program both run, and the CUDA kernels): logits of
// prefill steps on either CUDA path, of decode steps alone and batched
// (replayed from CUDA graphs), of copied KV blocks, and greedy text. Skips
// with a message where there is no NVIDIA driver or GPU (the refusals that
// need none are in CudaStepRunner_fake_driver_test.cpp).
//
// Tolerances, as the largest |cuda - cpu| over a step's logits relative to
// its largest |cpu| logit:
//  - stories260K (f32 weights, f32 cache), steps on the decode paths: 1e-4.
//    Both compute in f32; only the order of summation differs.
//  - a step with rows on a prefill path: 2e-2. The GEMM's operands are
//    rounded to f16 (11-bit mantissa) before cuBLAS multiplies them.
//  - SmolLM2 (Q4_1 weights, f16 cache), any step: 5e-2. The CPU kernels
//    quantize activations to 8 bits per block before the dot products (as
//    llama.cpp does), the GPU's decode kernels keep them in f32 and its
//    prefill GEMM rounds them to f16; over 30 layers that moves logits by a
//    few percent, where a wrong kernel moves them by their own size.
// Greedy ids must be equal to the CPU's; for SmolLM2 up to the first step
// where the CPU's top two logits lie closer than kCloseCall, where summation
// order may decide.
//
// The executables are compiled beforehand, by `scripts/gpu_check.sh
// prepare`, into $KVJIT_CUDA_TEST_KVX_DIR: this test links the runtime alone,
// so that it runs on GPU machines that have no compiler toolchain (LLVM,
// MLIR). Each test skips, naming the file, when its executable is absent.

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "runtime/cpu/CpuStepRunner.h"
#include "runtime/cuda/CudaStepRunner.h"
#include "runtime/generation/Generator.h"
#include "runtime/exec/Executable.h"
#include "tests/unit/common/NumericCompare.h"
#include "tests/unit/common/TestPaths.h"

namespace kvjit::cuda {
namespace {

using ::kvjit::testing::AllClose;
using ::kvjit::testing::AllEqual;
using ::kvjit::testing::CompareClose;
using ::kvjit::testing::NumericComparison;
using ::kvjit::testing::Passes;
using ::kvjit::testing::RelativeToLargest;
using ::testing::HasSubstr;

constexpr double kF32Tolerance = 1e-4;
constexpr double kGemmTolerance = 2e-2;
constexpr double kQuantizedTolerance = 5e-2;
constexpr float kCloseCall = 0.5f;

// The GPU's compute capability × 10, or the reason there is none.
absl::StatusOr<int> GpuArch() {
  static const absl::StatusOr<int>* const arch = [] {
    auto device = CudaDevice::Create(0);
    if (!device.ok()) return new absl::StatusOr<int>(device.status());
    return new absl::StatusOr<int>((*device)->arch());
  }();
  return *arch;
}

#define SKIP_WITHOUT_GPU()                                                        \
  do {                                                                            \
    if (!GpuArch().ok()) GTEST_SKIP() << "no usable GPU: " << GpuArch().status(); \
  } while (false)

// The executable `file_name` of $KVJIT_CUDA_TEST_KVX_DIR, loaded once per
// process; null with `error` set when it is absent or does not load.
const runtime::Executable* Prepared(const std::string& file_name, std::string* error) {
  static std::map<std::string, std::unique_ptr<runtime::Executable>> cache;
  auto found = cache.find(file_name);
  if (found != cache.end()) return found->second.get();
  const char* directory = std::getenv("KVJIT_CUDA_TEST_KVX_DIR");
  if (directory == nullptr || *directory == '\0') {
    *error = "$KVJIT_CUDA_TEST_KVX_DIR is not set (scripts/gpu_check.sh prepare makes it)";
    return nullptr;
  }
  const std::string path = std::string(directory) + "/" + file_name;
  if (!std::ifstream(path).good()) {
    *error = path + " not found (scripts/gpu_check.sh prepare compiles it)";
    return nullptr;
  }
  auto executable = runtime::Executable::Load(path);
  if (!executable.ok()) {
    *error = std::string(executable.status().message());
    return nullptr;
  }
  return (cache[file_name] = *std::move(executable)).get();
}

// One sequence's step over `count` tokens from position `first`, in the
// blocks of `table`, asking for every row's logits.
runtime::StepInputs SequenceStep(const std::vector<int32_t>& tokens, int64_t first, int64_t count,
                                 const std::vector<int32_t>& table, int64_t block_size) {
  runtime::StepInputs step;
  for (int64_t p = first; p < first + count; ++p) {
    step.tokens().push_back(tokens[p]);
    step.positions().push_back(static_cast<int32_t>(p));
    step.slot_mapping().push_back(
        static_cast<int32_t>(table[p / block_size] * block_size + p % block_size));
    step.logits_rows().push_back(static_cast<int32_t>(p - first));
  }
  step.seq_starts() = {0, static_cast<int32_t>(count)};
  step.context_lens() = {static_cast<int32_t>(first + count)};
  step.block_tables() = table;
  step.max_blocks = static_cast<int64_t>(table.size());
  return step;
}

struct ModelUnderTest {
  std::string name;
  std::string kvx;  // in $KVJIT_CUDA_TEST_KVX_DIR
  bool quantized;
};

void PrintTo(const ModelUnderTest& model, std::ostream* out) { *out << model.name; }

class CudaStepRunnerTest : public ::testing::TestWithParam<ModelUnderTest> {
 protected:
  void SetUp() override {
    SKIP_WITHOUT_GPU();
    const ModelUnderTest& model = GetParam();
    std::string error;
    executable_ = Prepared(model.kvx, &error);
    if (executable_ == nullptr) GTEST_SKIP() << model.name << ": " << error;
    ASSERT_NE(executable_->cuda(), nullptr) << model.kvx << " was not compiled for CUDA";
    block_size_ = executable_->kv_layout().block_size();
    prefill_min_rows_ = executable_->cuda()->prefill_min_rows();
    auto cpu = runtime::CpuStepRunner::Create(*executable_, kBlocks, /*threads=*/2);
    ASSERT_TRUE(cpu.ok()) << cpu.status();
    cpu_ = *std::move(cpu);
    auto gpu = CudaStepRunner::Create(*executable_, kBlocks, CudaRunnerOptions());
    ASSERT_TRUE(gpu.ok()) << gpu.status();
    gpu_ = *std::move(gpu);
  }

  // The tolerance of a step whose largest instruction has `rows` rows.
  double Tolerance(int64_t rows) const {
    if (GetParam().quantized) return kQuantizedTolerance;
    return rows >= prefill_min_rows_ ? kGemmTolerance : kF32Tolerance;
  }

  // Runs `step` on both runners and compares their logits.
  void ExpectSameLogits(const runtime::StepInputs& step, const std::string& what) {
    auto cpu = cpu_->Run(step);
    ASSERT_TRUE(cpu.ok()) << what << ": " << cpu.status();
    const std::vector<float> expected(cpu->begin(), cpu->end());
    auto gpu = gpu_->Run(step);
    ASSERT_TRUE(gpu.ok()) << what << ": " << gpu.status();
    const int64_t tokens = static_cast<int64_t>(step.tokens().size());
    const NumericComparison comparison =
        CompareClose(*gpu, expected, RelativeToLargest(Tolerance(tokens)));
    EXPECT_TRUE(Passes(comparison)) << what << " (" << tokens << " tokens; prefill paths from "
                                    << prefill_min_rows_ << " rows)";
    if (comparison.largest_difference) {
      RecordProperty(what, std::to_string(comparison.largest_difference->difference /
                                          comparison.largest_expected_magnitude));
    }
  }

  // Made-up token ids, the same in every run.
  std::vector<int32_t> Tokens(int64_t count) const {
    std::vector<int32_t> tokens;
    const int64_t vocab = executable_->config().vocab_size();
    for (int64_t i = 0; i < count; ++i)
      tokens.push_back(static_cast<int32_t>((1 + i * 7919) % vocab));
    return tokens;
  }

  static constexpr int64_t kBlocks = 64;
  const runtime::Executable* executable_ = nullptr;
  int64_t block_size_ = 0;
  int64_t prefill_min_rows_ = 0;
  std::unique_ptr<runtime::CpuStepRunner> cpu_;
  std::unique_ptr<CudaStepRunner> gpu_;
};

// Waits for each instruction: a kernel that faults is named by index and
// opcode here, where the other tests would only see the step fail.
TEST_P(CudaStepRunnerTest, EveryInstructionRunsWithoutAFault) {
  CudaRunnerOptions options;
  options.synchronize_each_instruction = true;
  auto runner = CudaStepRunner::Create(*executable_, kBlocks, options);
  ASSERT_TRUE(runner.ok()) << runner.status();
  const int64_t long_prompt =
      std::min<int64_t>(prefill_min_rows_ + 3, (*runner)->max_tokens_per_step());
  const std::vector<int32_t> tokens = Tokens(long_prompt + 1);
  const std::vector<int32_t> table = {5, 1, 7, 3, 2, 4, 6, 0, 8, 9, 10, 11, 12, 13, 14, 15};
  auto prefill = (*runner)->Run(SequenceStep(tokens, 0, long_prompt, table, block_size_));
  ASSERT_TRUE(prefill.ok()) << prefill.status();
  auto decode = (*runner)->Run(SequenceStep(tokens, long_prompt, 1, table, block_size_));
  ASSERT_TRUE(decode.ok()) << decode.status();
  for (float logit : *decode) ASSERT_TRUE(std::isfinite(logit));
}

// kvjit bench --profile on a GPU: each instruction timed by its CUDA events,
// in program order, none negative, and the logits those of an unobserved
// step.
class InstructionSpans : public runtime::StepObserver {
 public:
  void StepBegan(const runtime::StepInputs&) override { spans.clear(); }
  void InstructionRan(size_t index, Clock::time_point start, Clock::time_point end) override {
    spans.push_back({index, start, end});
  }
  void StepEnded() override { ++steps; }

  struct Span {
    size_t index;
    Clock::time_point start, end;
  };
  std::vector<Span> spans;
  int steps = 0;
};

TEST_P(CudaStepRunnerTest, ObservedStepsTimeEveryInstructionWithEvents) {
  const std::vector<int32_t> table = {3, 1, 2, 0};
  const std::vector<int32_t> tokens = Tokens(6);
  InstructionSpans observer;
  ASSERT_TRUE(gpu_->SetObserver(&observer).ok());
  ExpectSameLogits(SequenceStep(tokens, 0, 5, table, block_size_), "observed_prefill");
  ExpectSameLogits(SequenceStep(tokens, 5, 1, table, block_size_), "observed_decode");
  ASSERT_TRUE(gpu_->SetObserver(nullptr).ok());
  EXPECT_EQ(observer.steps, 2);
  ASSERT_EQ(observer.spans.size(), executable_->program().instructions()->size());
  for (size_t i = 0; i < observer.spans.size(); ++i) {
    EXPECT_EQ(observer.spans[i].index, i);
    EXPECT_LE(observer.spans[i].start, observer.spans[i].end) << "instruction " << i;
    if (i > 0) {
      EXPECT_LE(observer.spans[i - 1].end, observer.spans[i].start) << "instruction " << i;
    }
  }
}

TEST_P(CudaStepRunnerTest, PrefillLogitsMatchTheCpuOnBothPaths) {
  const std::vector<int32_t> table = {3, 1, 2, 0, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
  const int64_t limit = gpu_->max_tokens_per_step();
  std::vector<int64_t> lengths = {1, 5};
  if (prefill_min_rows_ - 1 > 5 && prefill_min_rows_ - 1 <= limit) {
    lengths.push_back(prefill_min_rows_ - 1);
  }
  if (prefill_min_rows_ <= limit) {
    lengths.push_back(prefill_min_rows_);
    lengths.push_back(limit);
  } else {
    RecordProperty("prefill_path", "not reached: prefill_min_rows exceeds the step");
  }
  const std::vector<int32_t> tokens = Tokens(limit);
  for (int64_t length : lengths) {
    if (length > static_cast<int64_t>(table.size()) * block_size_) continue;
    ExpectSameLogits(SequenceStep(tokens, 0, length, table, block_size_),
                     "prefill_" + std::to_string(length));
  }
}

TEST_P(CudaStepRunnerTest, DecodeStepsAfterAChunkedPrefillMatchTheCpu) {
  const std::vector<int32_t> table = {3, 1, 2, 0, 4, 5, 6, 7};
  const std::vector<int32_t> tokens = Tokens(24);
  int64_t cached = 0;
  for (int64_t count : {7, 5, 1, 1, 1, 1, 1, 1, 1, 1}) {
    ExpectSameLogits(SequenceStep(tokens, cached, count, table, block_size_),
                     "step_at_" + std::to_string(cached));
    cached += count;
  }
  if (!gpu_->graph_buckets().empty()) {
    EXPECT_GT(gpu_->graph_replays(), 0) << "decode steps of one sequence replay a CUDA graph";
  }
}

// Three sequences of different lengths prefilled in one step, then decoding
// together: steps padded to the bucket of 4 and replayed from a graph.
TEST_P(CudaStepRunnerTest, BatchedDecodeMatchesTheCpu) {
  const std::vector<std::vector<int32_t>> tables = {{0, 1, 2}, {3, 4, 5}, {6, 7, 8}};
  const std::vector<int64_t> prompts = {3, 9, 6};
  const std::vector<int32_t> tokens = Tokens(32);
  auto batch_step = [&](const std::vector<int64_t>& first, const std::vector<int64_t>& count) {
    runtime::StepInputs step;
    step.seq_starts().push_back(0);
    step.max_blocks = 3;
    for (size_t s = 0; s < tables.size(); ++s) {
      for (int64_t p = first[s]; p < first[s] + count[s]; ++p) {
        step.tokens().push_back(tokens[(p + 5 * s) % tokens.size()]);
        step.positions().push_back(static_cast<int32_t>(p));
        step.slot_mapping().push_back(
            static_cast<int32_t>(tables[s][p / block_size_] * block_size_ + p % block_size_));
      }
      step.seq_starts().push_back(static_cast<int32_t>(step.tokens().size()));
      step.context_lens().push_back(static_cast<int32_t>(first[s] + count[s]));
      step.logits_rows().push_back(static_cast<int32_t>(step.tokens().size() - 1));
      step.block_tables().insert(step.block_tables().end(), tables[s].begin(), tables[s].end());
    }
    return step;
  };
  ExpectSameLogits(batch_step({0, 0, 0}, prompts), "batched_prefill");
  for (int64_t k = 0; k < 6; ++k) {
    ExpectSameLogits(batch_step({prompts[0] + k, prompts[1] + k, prompts[2] + k}, {1, 1, 1}),
                     "batched_decode_" + std::to_string(k));
  }
  if (!gpu_->graph_buckets().empty() && gpu_->graph_buckets().back() >= 4) {
    EXPECT_GT(gpu_->graph_replays(), 0);
  }
}

// Replaying a captured graph over padded inputs computes what launching the
// kernels one by one on the unpadded step does, bit for bit: padding adds
// rows and sequences that no real row reads (batch invariance).
TEST_P(CudaStepRunnerTest, GraphReplayEqualsLaunchByLaunch) {
  CudaRunnerOptions eager_options;
  eager_options.largest_graph_batch = 0;
  auto eager = CudaStepRunner::Create(*executable_, kBlocks, eager_options);
  ASSERT_TRUE(eager.ok()) << eager.status();
  ASSERT_TRUE((*eager)->graph_buckets().empty());
  if (gpu_->graph_buckets().empty()) GTEST_SKIP() << "no decode step of this model fits a graph";
  const std::vector<int32_t> table = {2, 0, 1};
  const std::vector<int32_t> tokens = Tokens(12);
  for (CudaStepRunner* runner : {gpu_.get(), eager->get()}) {
    ASSERT_TRUE(runner->Run(SequenceStep(tokens, 0, 6, table, block_size_)).ok());
  }
  for (int64_t position = 6; position < 12; ++position) {
    const runtime::StepInputs step = SequenceStep(tokens, position, 1, table, block_size_);
    auto replayed = gpu_->Run(step);
    ASSERT_TRUE(replayed.ok()) << replayed.status();
    const std::vector<float> from_graph(replayed->begin(), replayed->end());
    auto launched = (*eager)->Run(step);
    ASSERT_TRUE(launched.ok()) << launched.status();
    ASSERT_TRUE(AllEqual(from_graph, *launched)) << "position " << position;
  }
  EXPECT_EQ(gpu_->graphs_captured(), 1);
  EXPECT_GE(gpu_->graph_replays(), 5);
}

// A copied block serves attention exactly as its source does.
TEST_P(CudaStepRunnerTest, ACopiedKvBlockAttendsLikeItsSource) {
  const std::vector<int32_t> tokens = Tokens(5);
  auto in_source = gpu_->Run(SequenceStep(tokens, 0, 5, {2}, block_size_));
  ASSERT_TRUE(in_source.ok()) << in_source.status();
  const std::vector<float> last_row(in_source->end() - gpu_->vocab_size(), in_source->end());
  ASSERT_TRUE(gpu_->CopyBlock(2, 5).ok());
  runtime::StepInputs again = SequenceStep(tokens, 4, 1, {5}, block_size_);
  auto in_copy = gpu_->Run(again);
  ASSERT_TRUE(in_copy.ok()) << in_copy.status();
  // The same row computed by a one-token step instead of a five-token one:
  // equal up to the paths' tolerance.
  EXPECT_TRUE(AllClose(*in_copy, last_row, RelativeToLargest(Tolerance(5))));
  EXPECT_EQ(gpu_->CopyBlock(2, kBlocks).code(), absl::StatusCode::kOutOfRange);
}

TEST_P(CudaStepRunnerTest, AStepThatDoesNotFitIsRefusedBeforeItReachesTheGpu) {
  const std::vector<int32_t> tokens = Tokens(4);
  runtime::StepInputs step = SequenceStep(tokens, 0, 4, {1}, block_size_);
  step.slot_mapping()[2] = static_cast<int32_t>(kBlocks * block_size_);
  auto logits = gpu_->Run(step);
  ASSERT_FALSE(logits.ok());
  EXPECT_THAT(logits.status().message(), HasSubstr("outside the pool"));
  // The runner still works after a refused step.
  EXPECT_TRUE(gpu_->Run(SequenceStep(tokens, 0, 4, {1}, block_size_)).ok());
}

// Greedy generation through the engine on both runners: the same ids.
TEST_P(CudaStepRunnerTest, GreedyIdsEqualTheCpus) {
  std::vector<std::vector<int32_t>> prompts;
  if (GetParam().name == "SmolLM2") {
    const std::string expected = testing::TestDataPath("llamacpp/smollm2_greedy.json");
    ASSERT_FALSE(expected.empty());
    for (const nlohmann::json& prompt : nlohmann::json::parse(std::ifstream(expected))["prompts"]) {
      prompts.push_back(prompt["prompt_ids"].get<std::vector<int32_t>>());
    }
  } else {
    prompts.push_back({1, 403, 407, 261, 378});  // "Once upon a time"
  }
  const int64_t context = executable_->config().context_length();
  sampling::SamplingParams greedy;
  greedy.temperature = 0;
  int compared = 0;
  for (const std::vector<int32_t>& prompt : prompts) {
    std::vector<float> margins;  // the CPU's top-two gap at each step
    auto cpu = runtime::Generator(*cpu_, context)
                   .Generate(
                       prompt, greedy, 48, [](int32_t) { return true; },
                       [&](absl::Span<const float> logits) {
                         std::vector<float> top(2);
                         std::partial_sort_copy(logits.begin(), logits.end(), top.begin(),
                                                top.end(), std::greater<float>());
                         margins.push_back(top[0] - top[1]);
                       });
    ASSERT_TRUE(cpu.ok()) << cpu.status();
    auto gpu = runtime::Generator(*gpu_, context).Generate(prompt, greedy, 48, [](int32_t) {
      return true;
    });
    ASSERT_TRUE(gpu.ok()) << gpu.status();
    for (size_t i = 0; i < cpu->tokens.size(); ++i) {
      if (GetParam().quantized && margins[i] < kCloseCall) break;
      ASSERT_LT(i, gpu->tokens.size());
      ASSERT_EQ(gpu->tokens[i], cpu->tokens[i]) << "step " << i;
      ++compared;
    }
  }
  EXPECT_GE(compared, 24) << "too few tokens compared to mean anything";
  RecordProperty("compared_tokens", compared);
}

// Compiled with --target cuda: stories260K with --cache_dtype f32
// --max_tokens_per_step 64, SmolLM2 (Q4_1) with --cache_dtype f16
// --max_tokens_per_step 128.
std::vector<ModelUnderTest> Models() {
  return {{"stories260K", "stories260K-cuda.kvx", false}, {"SmolLM2", "SmolLM2-cuda.kvx", true}};
}

INSTANTIATE_TEST_SUITE_P(Models, CudaStepRunnerTest, ::testing::ValuesIn(Models()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace kvjit::cuda
