// The generated CUDA kernels, run without a GPU by the host emulation
// (codegen/cuda/emulation: each CUDA thread a fiber, real __syncthreads and
// warp shuffles, launches run as the contract says), and the logits of every
// step are compared with the CPU runtime's over the same steps: prefill
// of several sequences in one step, decode of one and of several tokens per
// sequence, prefill over a cached context, and decode over more than one
// attention split, with scattered block tables. The synthetic program's
// KvWrite and KvAttention run over every KV cache type, mixed and rotated:
// the pool's bytes must be the CPU's exactly, the outputs within a stated
// tolerance of the CPU's and of a double-precision reference.

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <ostream>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "codegen/cuda/CudaCodegen.h"
#include "codegen/cuda/emulation/EmulatedStepRunner.h"
#include "codegen/cuda/emulation/HostKernels.h"
#include "gtest/gtest.h"
#include "runtime/cpu/CpuStepRunner.h"
#include "runtime/cpu/KvCacheRows.h"
#include "runtime/cpu/PagedAttention.h"
#include "runtime/cpu/Rope.h"
#include "runtime/cpu/ThreadPool.h"
#include "runtime/cuda/LaunchBinding.h"
#include "runtime/exec/Executable.h"
#include "runtime/exec/KvxTypes.h"
#include "runtime/quant/Dequantize.h"
#include "runtime/quant/Half.h"
#include "runtime/quant/StorageType.h"
#include "runtime/schema/CudaLaunchAbi.h"
#include "runtime/schema/KvCacheFormat.h"
#include "runtime/schema/OpOperands.h"
#include "tests/unit/codegen/cuda/CudaTestExecutables.h"
#include "tests/unit/common/NumericCompare.h"
#include "tests/unit/common/TestPaths.h"

namespace kvjit::codegen::cuda {
namespace {

using ::kvjit::testing::Absolute;
using ::kvjit::testing::AllClose;
using ::kvjit::testing::AllWithin;
using ::kvjit::testing::RelativeToLargest;

// Runs one path of an instruction on the host; a failure names it.
::testing::AssertionResult RunsOnHost(const HostKernels& kernels, const CudaModuleSpec& module,
                                      const PathSpec& path, int inputs, int outputs,
                                      const cuda_abi::LaunchArgs& args,
                                      const runtime::StepSizes& sizes) {
  const absl::Status ran = RunPathOnHost(kernels, module, path, inputs, outputs, args, sizes);
  if (ran.ok()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << ran;
}

// Sequences growing over steps, their blocks taken from a shuffled free list.
class Batch {
 public:
  Batch(int64_t num_blocks, int64_t block_size, int32_t vocab)
      : block_size_(block_size), vocab_(vocab) {
    for (int64_t b = 0; b < num_blocks; ++b) free_.push_back(static_cast<int32_t>(b));
    std::shuffle(free_.begin(), free_.end(), random_);
  }

  // One step: `counts[s]` new tokens of sequence `order[s]`; logits for
  // every row when `all_logits`, else for each sequence's last row.
  runtime::StepInputs Step(const std::vector<std::pair<int, int>>& order_and_counts,
                           bool all_logits) {
    runtime::StepInputs step;
    step.seq_starts().push_back(0);
    std::vector<int> sequences;
    for (const auto& [sequence, count] : order_and_counts) {
      if (sequence >= static_cast<int>(lengths_.size())) {
        lengths_.resize(sequence + 1, 0);
        blocks_.resize(sequence + 1);
      }
      for (int i = 0; i < count; ++i) {
        const int32_t position = lengths_[sequence]++;
        if (position % block_size_ == 0) {
          blocks_[sequence].push_back(free_.back());
          free_.pop_back();
        }
        step.tokens().push_back(static_cast<int32_t>(random_() % vocab_));
        step.positions().push_back(position);
        step.slot_mapping().push_back(static_cast<int32_t>(
            blocks_[sequence][position / block_size_] * block_size_ + position % block_size_));
        if (all_logits) step.logits_rows().push_back(static_cast<int32_t>(step.tokens().size() - 1));
      }
      if (!all_logits) step.logits_rows().push_back(static_cast<int32_t>(step.tokens().size() - 1));
      step.seq_starts().push_back(static_cast<int32_t>(step.tokens().size()));
      step.context_lens().push_back(lengths_[sequence]);
      sequences.push_back(sequence);
      step.max_blocks = std::max<int64_t>(step.max_blocks, blocks_[sequence].size());
    }
    for (int sequence : sequences) {
      std::vector<int32_t> row = blocks_[sequence];
      row.resize(step.max_blocks, -1);
      step.block_tables().insert(step.block_tables().end(), row.begin(), row.end());
    }
    return step;
  }

 private:
  int64_t block_size_;
  int32_t vocab_;
  std::mt19937 random_{7};
  std::vector<int32_t> free_;
  std::vector<int32_t> lengths_;
  std::vector<std::vector<int32_t>> blocks_;
};

class CudaKernelEmulationTest : public ::testing::TestWithParam<const char*> {};

TEST_P(CudaKernelEmulationTest, Stories260KMatchesTheCpuRuntime) {
  const std::string model = kvjit::testing::SharedPath("models/stories260K.gguf");
  if (model.empty()) GTEST_SKIP() << "models/stories260K.gguf is not in the shared folder";
  const std::string cache = GetParam();
  const std::string directory =
      absl::StrCat(::testing::TempDir(), "/kvjit_emulation_", cache, "_", getpid());
  std::filesystem::create_directories(directory);
  absl::StatusOr<std::string> bytes = testing::CompiledExecutable(model, cache);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  const std::string kvx_path = directory + "/stories.kvx";
  std::ofstream(kvx_path, std::ios::binary) << *bytes;
  absl::StatusOr<std::unique_ptr<runtime::Executable>> executable =
      runtime::Executable::Load(kvx_path);
  ASSERT_TRUE(executable.ok()) << executable.status();
  absl::StatusOr<CudaModuleSpec> module = GenerateCudaModule((*executable)->root());
  ASSERT_TRUE(module.ok()) << module.status();

  absl::StatusOr<std::unique_ptr<HostKernels>> kernels = HostKernels::Build(module->source);
  ASSERT_TRUE(kernels.ok()) << kernels.status();

  constexpr int64_t kBlocks = 48;
  absl::StatusOr<std::unique_ptr<runtime::CpuStepRunner>> cpu =
      runtime::CpuStepRunner::Create(**executable, kBlocks, 1);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  absl::StatusOr<std::unique_ptr<EmulatedStepRunner>> gpu = EmulatedStepRunner::Create(
      **executable, *module, **kernels, kBlocks, EmulatedPaths::kAsOnAGpu);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  const int32_t vocab = static_cast<int32_t>((*executable)->config().vocab_size());
  Batch batch(kBlocks, (*executable)->kv_layout().block_size(), vocab);

  // (sequence, new tokens) per step; T >= 32 takes the prefill paths.
  const std::vector<std::pair<std::vector<std::pair<int, int>>, bool>> steps = {
      {{{0, 70}, {1, 25}}, true},         // prefill of two sequences; every row's logits
      {{{0, 1}, {1, 1}}, false},          // decode
      {{{1, 6}, {0, 1}}, false},          // decode path, several tokens of one sequence
      {{{1, 40}, {0, 1}}, false},         // prefill over a cached context, beside a decode
      {{{0, 62}}, false},                 // one sequence past one attention split (128 keys)
      {{{2, 3}, {0, 1}, {1, 1}}, false},  // decode over two splits
  };
  for (size_t s = 0; s < steps.size(); ++s) {
    SCOPED_TRACE(absl::StrCat("step ", s));
    const runtime::StepInputs inputs = batch.Step(steps[s].first, steps[s].second);
    absl::StatusOr<absl::Span<const float>> expected = (*cpu)->Run(inputs);
    ASSERT_TRUE(expected.ok()) << expected.status();
    absl::StatusOr<absl::Span<const float>> actual = (*gpu)->Run(inputs);
    ASSERT_TRUE(actual.ok()) << actual.status();
    // The prefill GEMM rounds its operands to f16; the rest differs from
    // the CPU in summation order and exp. A bf16 cache then rounds keys and
    // values that differ by those f16 roundings to 8 significant bits (a
    // step 8 times an f16 one), which flips some of them: its worst logit
    // is 0.0127 of the largest, so 2e-2.
    const double tolerance = cache == "bf16" ? 2e-2 : 1e-2;
    EXPECT_TRUE(AllClose(*actual, *expected, RelativeToLargest(tolerance)))
        << "actual: the emulated kernels' logits; expected: the CPU's";
  }
  std::filesystem::remove_all(directory);
}

// Rows of `storage` with random payloads and moderate scales (random f16
// scale bits would be NaN or huge): the f16 fields of each block, by type.
struct BlockFormat {
  kvx::StorageType storage;
  int block_bytes;
  std::vector<int> scale_offsets;
};
const BlockFormat kBlockFormats[] = {
    {kvx::StorageType::Q8_0, 34, {0}},     {kvx::StorageType::Q4_0, 18, {0}},
    {kvx::StorageType::Q4_1, 20, {0, 2}},  {kvx::StorageType::Q5_0, 22, {0}},
    {kvx::StorageType::Q5_1, 24, {0, 2}},  {kvx::StorageType::Q4_K, 144, {0, 2}},
    {kvx::StorageType::Q5_K, 176, {0, 2}}, {kvx::StorageType::Q6_K, 210, {208}},
};

std::vector<uint8_t> RandomWeight(kvx::StorageType storage, int64_t elements,
                                  std::mt19937& random) {
  std::normal_distribution<float> normal(0.0f, 0.1f);
  std::vector<uint8_t> bytes;
  auto append = [&](const void* data, size_t size) {
    const auto* begin = static_cast<const uint8_t*>(data);
    bytes.insert(bytes.end(), begin, begin + size);
  };
  for (int64_t i = 0; storage == kvx::StorageType::F32 && i < elements; ++i) {
    const float value = normal(random);
    append(&value, 4);
  }
  for (int64_t i = 0; storage == kvx::StorageType::F16 && i < elements; ++i) {
    const uint16_t value = quant::FloatToHalf(normal(random));
    append(&value, 2);
  }
  for (int64_t i = 0; storage == kvx::StorageType::BF16 && i < elements; ++i) {
    const float value = normal(random);
    uint32_t bits;
    std::memcpy(&bits, &value, 4);
    const uint16_t top = static_cast<uint16_t>(bits >> 16);
    append(&top, 2);
  }
  for (const BlockFormat& format : kBlockFormats) {
    if (format.storage != storage) continue;
    const int64_t elements_per_block = format.block_bytes > 100 ? 256 : 32;
    std::uniform_real_distribution<float> scale(0.002f, 0.02f);
    for (int64_t block = 0; block < elements / elements_per_block; ++block) {
      std::vector<uint8_t> bits(format.block_bytes);
      for (uint8_t& byte : bits) byte = static_cast<uint8_t>(random());
      for (int offset : format.scale_offsets) {
        const uint16_t value = quant::FloatToHalf(scale(random));
        std::memcpy(bits.data() + offset, &value, 2);
      }
      bytes.insert(bytes.end(), bits.begin(), bits.end());
    }
  }
  return bytes;
}

std::vector<float> RandomFloats(int64_t count, float spread, std::mt19937& random) {
  std::normal_distribution<float> normal(0.0f, spread);
  std::vector<float> values(count);
  for (float& value : values) value = normal(random);
  return values;
}

// The synthetic program's Linear (every storage type, biases, logits rows)
// and Rope (NeoX with partial rotation and Llama 3 scaling; interleaved
// with linear scaling) instructions on both paths, against the CPU's
// weights (quant::DequantizeRow) and runtime/cpu/Rope.cpp.
TEST(CudaSyntheticKernelEmulationTest, LinearAndRopeMatchTheCpu) {
  const std::string bytes = testing::SyntheticExecutable(kvx::StorageType::F32);
  const kvx::Executable& executable = *kvx::GetExecutable(bytes.data());
  absl::StatusOr<CudaModuleSpec> module = GenerateCudaModule(executable);
  ASSERT_TRUE(module.ok()) << module.status();
  absl::StatusOr<std::unique_ptr<HostKernels>> kernels = HostKernels::Build(module->source);
  ASSERT_TRUE(kernels.ok()) << kernels.status();
  std::mt19937 random(11);
  cpu::ThreadPool pool(1);
  int linears = 0, ropes = 0;

  const auto& instructions = *executable.program()->instructions();
  for (size_t i = 0; i < instructions.size(); ++i) {
    const kvx::Instruction& instruction = *instructions[i];
    const InstructionSpec& spec = module->instructions[i];
    const int inputs = static_cast<int>(instruction.inputs()->size());
    SCOPED_TRACE(absl::StrCat("instruction ", i, " (", kvx::EnumNameOpCode(instruction.op()), ")"));
    if (instruction.op() == kvx::OpCode::Linear) {
      ++linears;
      using Operand = kvx::LinearOperand;
      const kvx::Weight& weight =
          *executable.weights()->Get(kvx::InputOf(instruction, Operand::Weight).index());
      const int64_t n = weight.shape()->Get(0), k = weight.shape()->Get(1);
      SCOPED_TRACE(kvx::EnumNameStorageType(weight.storage()));
      absl::StatusOr<quant::StorageType> storage = runtime::FromKvxStorage(weight.storage());
      ASSERT_TRUE(storage.ok());
      const std::vector<uint8_t> w = RandomWeight(weight.storage(), n * k, random);
      ASSERT_EQ(w.size(), *quant::RowBytes(*storage, k) * n);
      std::vector<float> dequantized(n * k);
      ASSERT_TRUE(quant::DequantizeRow(*storage, w, absl::MakeSpan(dequantized)).ok());
      std::vector<uint8_t> bias_bytes;
      std::vector<float> bias(n, 0.0f);
      const bool has_bias = kvx::HasOperand(instruction, Operand::Bias);
      if (has_bias) {
        const kvx::Weight& bias_weight =
            *executable.weights()->Get(kvx::InputOf(instruction, Operand::Bias).index());
        bias_bytes = RandomWeight(bias_weight.storage(), n, random);
        ASSERT_TRUE(quant::DequantizeRow(*runtime::FromKvxStorage(bias_weight.storage()),
                                         bias_bytes, absl::MakeSpan(bias))
                        .ok());
      }
      for (int64_t rows : {5, 40}) {  // the decode path, then the prefill path
        SCOPED_TRACE(absl::StrCat(rows, " rows"));
        const std::vector<float> x = RandomFloats(rows * k, 1.0f, random);
        std::vector<float> y(rows * n, std::nanf(""));
        cuda_abi::LaunchArgs args = {};
        args.tokens = args.logits_rows = static_cast<int32_t>(rows);
        args.sequences = args.max_blocks = 1;
        args.buffers[kvx::OperandIndex(Operand::X)] = const_cast<float*>(x.data());
        args.buffers[kvx::OperandIndex(Operand::Weight)] = const_cast<uint8_t*>(w.data());
        if (has_bias) args.buffers[kvx::OperandIndex(Operand::Bias)] = bias_bytes.data();
        args.buffers[inputs] = y.data();
        const runtime::StepSizes sizes = {rows, rows, 1, 1};
        const PathSpec& path =
            SizeExprProduct(spec.rows, sizes) < module->prefill_min_rows ? spec.decode : spec.prefill;
        ASSERT_TRUE(RunsOnHost(**kernels, *module, path, inputs, 1, args, sizes));
        std::vector<double> expected(rows * n), tolerances(rows * n);
        for (int64_t r = 0; r < rows; ++r) {
          for (int64_t o = 0; o < n; ++o) {
            double sum = bias[o], magnitude = std::fabs(bias[o]);
            for (int64_t c = 0; c < k; ++c) {
              sum += double{dequantized[o * k + c]} * x[r * k + c];
              magnitude += std::fabs(double{dequantized[o * k + c]} * x[r * k + c]);
            }
            expected[r * n + o] = sum;
            // The prefill path's f16 operands carry 11 bits.
            tolerances[r * n + o] = (path.gemm ? 2e-3 : 1e-5) * magnitude;
          }
        }
        EXPECT_TRUE(AllWithin(y, expected, tolerances))
            << "elements are [row, output] of [" << rows << ", " << n << "]";
      }
    } else if (instruction.op() == kvx::OpCode::Rope) {
      ++ropes;
      using Operand = kvx::RopeOperand;
      const kvx::TensorRef& x_ref = kvx::InputOf(instruction, Operand::X);
      const int64_t heads = x_ref.shape()->Get(1)->size(), head_dim = x_ref.shape()->Get(2)->size();
      const kvx::RopeParams& rope = *instruction.params_as_RopeParams();
      cpu::RopeParams params;
      params.style = rope.style() == kvx::RopeStyle::NeoX ? cpu::RopeStyle::kNeox
                                                          : cpu::RopeStyle::kInterleaved;
      params.theta = rope.theta();
      params.rotary_dim = rope.rotary_dim() > 0 ? rope.rotary_dim() : head_dim;
      const kvx::RopeScaling& scaling = *rope.scaling();
      params.scaling.kind =
          scaling.kind() == kvx::RopeScalingKind::Llama3   ? cpu::RopeScaling::Kind::kLlama3
          : scaling.kind() == kvx::RopeScalingKind::Linear ? cpu::RopeScaling::Kind::kLinear
                                                           : cpu::RopeScaling::Kind::kNone;
      params.scaling.factor = scaling.factor();
      params.scaling.low_freq_factor = scaling.low_freq_factor();
      params.scaling.high_freq_factor = scaling.high_freq_factor();
      params.scaling.original_max_positions = scaling.original_context();
      constexpr int64_t kTokens = 6;
      const std::vector<float> x = RandomFloats(kTokens * heads * head_dim, 1.0f, random);
      const std::vector<int32_t> positions = {0, 1, 17, 300, 2047, 5000};
      std::vector<float> expected(x.size()), actual(x.size(), std::nanf(""));
      ASSERT_TRUE(cpu::Rope(x.data(), kTokens, heads, head_dim, positions.data(), params,
                            expected.data(), pool)
                      .ok());
      cuda_abi::LaunchArgs args = {};
      args.tokens = args.logits_rows = kTokens;
      args.sequences = args.max_blocks = 1;
      constexpr int kRopeInputs = kvx::kOperandCount<Operand>;
      args.buffers[kvx::OperandIndex(Operand::X)] = const_cast<float*>(x.data());
      args.buffers[kvx::OperandIndex(Operand::Positions)] = const_cast<int32_t*>(positions.data());
      args.buffers[kRopeInputs] = actual.data();
      const runtime::StepSizes sizes = {kTokens, kTokens, 1, 1};
      ASSERT_TRUE(RunsOnHost(**kernels, *module, spec.decode, kRopeInputs, 1, args, sizes));
      // Angles of thousands of radians, rounded in another order.
      EXPECT_TRUE(AllClose(actual, expected, Absolute(2e-3)));
    }
  }
  EXPECT_EQ(linears, 13);
  EXPECT_EQ(ropes, 2);
}

// The synthetic program's KvWrite and KvAttention (3 query heads per kv
// head) on both paths, over every cache type of KvCacheFormat.h, keys and
// values of different types, rotated and not, against
// runtime/cpu/PagedAttention.cpp: a prefill of three sequences (one past an
// attention split), then a decode step of one and of several tokens per
// sequence. After each KvWrite the emulated pool must hold the CPU's
// WriteKv bytes exactly (memcmp). Head_dim 80 (lanes past the head in the
// last 32) for the element types, 64 and 128 for the blocked ones (128:
// keys rotated in blocks of 128, butterflies between registers).
struct AttentionCase {
  kvx::StorageType key_type;
  kvx::StorageType value_type;
  int64_t head_dim;
  int64_t key_rotation;
  int64_t value_rotation;
};

void PrintTo(const AttentionCase& c, std::ostream* os) {
  *os << kvx::KvCacheTypesName(c.key_type, c.value_type) << ", head_dim " << c.head_dim
      << ", rotations " << c.key_rotation << "/" << c.value_rotation;
}

class CudaSyntheticAttentionEmulationTest : public ::testing::TestWithParam<AttentionCase> {};

// Attention in double over the values the cache holds (PortableLoadKvRow),
// the query rotated by the keys' rotation (then, over q8_0 and q4_0 keys,
// rounded to q8_0: KvCacheFormat.h's QuantizesQuery) and the output by the
// values', in f32 as the kernels and the CPU rotate and round: what the
// kernels compute, up to f32 rounding.
std::vector<float> ReferenceAttention(const std::vector<float>& query, int64_t heads,
                                      const cpu::PagedKvLayout& layout, int64_t layer,
                                      const uint8_t* pool, const runtime::StepInputs& inputs,
                                      int64_t max_blocks, float scale) {
  const int64_t head_dim = layout.head_dim, group = heads / layout.kv_heads;
  std::vector<float> out(query.size());
  std::vector<float> q(head_dim), k(head_dim), v(head_dim), o(head_dim);
  for (int64_t s = 0; s + 1 < static_cast<int64_t>(inputs.seq_starts().size()); ++s) {
    const int32_t* table = inputs.block_tables().data() + s * max_blocks;
    for (int64_t t = inputs.seq_starts()[s]; t < inputs.seq_starts()[s + 1]; ++t) {
      for (int64_t h = 0; h < heads; ++h) {
        const int64_t g = h / group;
        std::copy_n(query.begin() + (t * heads + h) * head_dim, head_dim, q.begin());
        if (layout.key_rotation > 0) cpu::RotateHadamard(q.data(), head_dim, layout.key_rotation);
        if (kvx::QuantizesQuery(layout.key_type)) {
          std::vector<uint8_t> blocks(cpu::KvRowBytes(kvx::StorageType::Q8_0, head_dim));
          cpu::StoreKvRow(kvx::StorageType::Q8_0, q.data(), head_dim, blocks.data());
          cpu::PortableLoadKvRow(kvx::StorageType::Q8_0, blocks.data(), head_dim, q.data());
        }
        const int64_t keys = inputs.positions()[t] + 1;
        std::vector<double> scores(keys);
        std::vector<std::vector<float>> values(keys);
        double max = -INFINITY;
        for (int64_t j = 0; j < keys; ++j) {
          const uint8_t* base = pool + table[j / layout.block_size] * layout.BlockBytes() +
                                layer * layout.LayerStride();
          const int64_t in_block = j % layout.block_size;
          cpu::PortableLoadKvRow(layout.key_type,
                                 base + in_block * layout.KeySlotStride() +
                                     cpu::KvRowBytes(layout.key_type, g * head_dim),
                                 head_dim, k.data());
          cpu::PortableLoadKvRow(layout.value_type,
                                 base + layout.ValueOffset() + in_block * layout.ValueSlotStride() +
                                     cpu::KvRowBytes(layout.value_type, g * head_dim),
                                 head_dim, v.data());
          double dot = 0.0;
          for (int64_t d = 0; d < head_dim; ++d) dot += double{q[d]} * k[d];
          scores[j] = scale * dot;
          max = std::max(max, scores[j]);
          values[j] = v;
        }
        double denominator = 0.0;
        std::vector<double> sum(head_dim, 0.0);
        for (int64_t j = 0; j < keys; ++j) {
          const double weight = std::exp(scores[j] - max);
          denominator += weight;
          for (int64_t d = 0; d < head_dim; ++d) sum[d] += weight * values[j][d];
        }
        for (int64_t d = 0; d < head_dim; ++d) o[d] = static_cast<float>(sum[d] / denominator);
        if (layout.value_rotation > 0) cpu::RotateHadamard(o.data(), head_dim, layout.value_rotation);
        std::copy(o.begin(), o.end(), out.begin() + (t * heads + h) * head_dim);
      }
    }
  }
  return out;
}

TEST_P(CudaSyntheticAttentionEmulationTest, MatchesTheCpu) {
  const AttentionCase& c = GetParam();
  const std::string bytes = testing::SyntheticExecutable(
      {c.key_type, c.value_type, c.head_dim, c.key_rotation, c.value_rotation});
  const kvx::Executable& executable = *kvx::GetExecutable(bytes.data());
  absl::StatusOr<CudaModuleSpec> module = GenerateCudaModule(executable);
  ASSERT_TRUE(module.ok()) << module.status();
  absl::StatusOr<std::unique_ptr<HostKernels>> kernels = HostKernels::Build(module->source);
  ASSERT_TRUE(kernels.ok()) << kernels.status();

  const auto& instructions = *executable.program()->instructions();
  int write_index = -1, attention_index = -1;
  for (size_t i = 0; i < instructions.size(); ++i) {
    if (instructions[i]->op() == kvx::OpCode::KvWrite) write_index = static_cast<int>(i);
    if (instructions[i]->op() == kvx::OpCode::KvAttention) attention_index = static_cast<int>(i);
  }
  ASSERT_GE(write_index, 0);
  ASSERT_GE(attention_index, 0);
  const kvx::Instruction& attention = *instructions[attention_index];
  const kvx::KvLayout& kv = *executable.kv_layout();
  const int64_t heads = attention.inputs()->Get(0)->shape()->Get(1)->size();
  const cpu::PagedKvLayout layout = {kv.num_layers(), kv.num_kv_heads(), kv.head_dim(),
                                     kv.block_size(),  c.key_type,        c.value_type,
                                     c.key_rotation,   c.value_rotation};
  ASSERT_EQ(static_cast<uint64_t>(layout.BlockBytes()), kv.bytes_per_block());
  constexpr int64_t kBlocks = 32;
  std::vector<float> cpu_pool(kBlocks * kv.bytes_per_block() / sizeof(float), 0.0f);
  std::vector<float> gpu_pool(cpu_pool.size(), 0.0f);
  cpu::ThreadPool pool(1);
  std::mt19937 random(5);
  Batch batch(kBlocks, kv.block_size(), 1);
  const kvx::KvAttentionParams& params = *attention.params_as_KvAttentionParams();
  const int64_t layer = instructions[write_index]->params_as_KvWriteParams()->layer();
  ASSERT_EQ(params.layer(), layer);

  for (const std::vector<std::pair<int, int>>& step : std::vector<std::vector<std::pair<int, int>>>{
           {{0, 140}, {1, 20}, {2, 5}}, {{1, 1}, {0, 1}, {2, 4}}}) {
    const runtime::StepInputs inputs = batch.Step(step, false);
    const int64_t tokens = static_cast<int64_t>(inputs.tokens().size());
    SCOPED_TRACE(absl::StrCat(tokens, " tokens"));
    const runtime::StepSizes sizes = runtime::SizesOf(inputs);
    std::vector<float> key = RandomFloats(tokens * kv.num_kv_heads() * kv.head_dim(), 1.0f, random);
    const std::vector<float> value = RandomFloats(key.size(), 1.0f, random);
    const std::vector<float> query = RandomFloats(tokens * heads * kv.head_dim(), 1.0f, random);
    // An outlier channel per kv head, as real keys have (what rotation is for),
    // and a block of zeros (a scale of 0) in the first token's keys.
    for (size_t i = 0; i < key.size(); i += kv.head_dim()) key[i + 3] *= 20.0f;
    std::fill_n(key.begin(), std::min<int64_t>(32, kv.head_dim()), 0.0f);

    uint8_t* gpu_layer = reinterpret_cast<uint8_t*>(gpu_pool.data()) + layer * kv.layer_stride_bytes();
    cuda_abi::LaunchArgs write = {};
    ::kvjit::cuda::SetStepSizes(sizes, write);
    cuda_abi::LaunchArgs attend = write;
    using WriteOperand = kvx::KvWriteOperand;
    constexpr int kWriteInputs = kvx::kOperandCount<WriteOperand>;
    write.buffers[kvx::OperandIndex(WriteOperand::Key)] = key.data();
    write.buffers[kvx::OperandIndex(WriteOperand::Value)] = const_cast<float*>(value.data());
    write.buffers[kvx::OperandIndex(WriteOperand::SlotMapping)] =
        const_cast<int32_t*>(inputs.slot_mapping().data());
    write.buffers[cuda_abi::KvPoolBuffer(kWriteInputs, 0)] = gpu_layer;
    const InstructionSpec& write_spec = module->instructions[write_index];
    ASSERT_TRUE(RunsOnHost(**kernels, *module, write_spec.prefill, kWriteInputs, 0, write, sizes));

    std::vector<float> actual(query.size(), std::nanf("")), expected(query.size());
    using AttentionOperand = kvx::KvAttentionOperand;
    constexpr int kAttentionInputs = kvx::kOperandCount<AttentionOperand>;
    auto step_input = [&](AttentionOperand operand, kvx::StepInput input) {
      attend.buffers[kvx::OperandIndex(operand)] = const_cast<int32_t*>(inputs[input].data());
    };
    attend.buffers[kvx::OperandIndex(AttentionOperand::Query)] = const_cast<float*>(query.data());
    step_input(AttentionOperand::Positions, kvx::StepInput::Positions);
    step_input(AttentionOperand::SeqStarts, kvx::StepInput::SeqStarts);
    step_input(AttentionOperand::ContextLens, kvx::StepInput::ContextLens);
    step_input(AttentionOperand::BlockTables, kvx::StepInput::BlockTables);
    attend.buffers[kAttentionInputs] = actual.data();
    attend.buffers[cuda_abi::KvPoolBuffer(kAttentionInputs, 1)] = gpu_layer;
    const InstructionSpec& spec = module->instructions[attention_index];
    const PathSpec& path =
        SizeExprProduct(spec.rows, sizes) < module->prefill_min_rows ? spec.decode : spec.prefill;
    ASSERT_TRUE(RunsOnHost(**kernels, *module, path, kAttentionInputs, 1, attend, sizes));

    auto* cpu_bytes = reinterpret_cast<uint8_t*>(cpu_pool.data());
    ASSERT_TRUE(cpu::WriteKv(key.data(), value.data(), tokens, inputs.slot_mapping().data(), layout,
                             layer, cpu_bytes, kBlocks, pool)
                    .ok());
    cpu::PagedAttentionBatch cpu_batch = {
        inputs.positions().data(),    inputs.seq_starts().data(), inputs.context_lens().data(),
        inputs.block_tables().data(), sizes.sequences,          sizes.max_blocks};
    ASSERT_TRUE(cpu::PagedAttention(query.data(), tokens, heads, layout, layer, cpu_bytes, kBlocks,
                                    cpu_batch, params.scale(), params.window(), params.softcap(),
                                    expected.data(), pool)
                    .ok());
    const auto* gpu_bytes = reinterpret_cast<const uint8_t*>(gpu_pool.data());
    const auto mismatch = std::mismatch(cpu_bytes, cpu_bytes + cpu_pool.size() * sizeof(float), gpu_bytes);
    ASSERT_EQ(std::memcmp(cpu_pool.data(), gpu_pool.data(), cpu_pool.size() * sizeof(float)), 0)
        << "the caches differ, first at byte " << (mismatch.first - cpu_bytes) << " (CPU "
        << int{*mismatch.first} << ", kernels " << int{*mismatch.second} << "; a block is "
        << kv.bytes_per_block() << " bytes, a layer " << kv.layer_stride_bytes()
        << ", keys' slots " << kv.key_slot_stride_bytes() << ", values' from "
        << kv.value_offset_bytes() << ")";

    // The kernels' own arithmetic: f32 dot products and online softmax over
    // the cached values, against double over the same values. Scores are
    // N(0, 1)-sized sums of head_dim products and outputs averages of
    // N(0, 1) values: f32 rounding and the order of the sums leave them at
    // most 4e-6 apart in every case here; a wrong element, scale, stride or
    // rotation is off by 0.1 or more.
    const std::vector<float> reference = ReferenceAttention(
        query, heads, layout, layer, cpu_bytes, inputs, sizes.max_blocks, params.scale());
    EXPECT_TRUE(AllClose(actual, reference, Absolute(2e-5)))
        << "actual: the kernels; expected: double over the cached values. Elements are [token, "
           "head, dimension] of ["
        << tokens << ", " << heads << ", " << kv.head_dim() << "]";
    // Against the CPU runtime: its f32 path (every cache but f16/f16) is the
    // same arithmetic in another summation order (2e-5, as above), its
    // integer dot products over q8_0 and q4_0 keys the same sums over the
    // same q8_0-rounded query exactly but for the f32 roundings of the
    // kernels' sums. Its f16/f16 path rounds the query and the probabilities
    // to f16, as ggml does (2e-2).
    const bool half_path = c.key_type == kvx::StorageType::F16 && c.value_type == kvx::StorageType::F16;
    const double tolerance = half_path ? 2e-2 : 2e-5;
    EXPECT_TRUE(AllClose(actual, expected, Absolute(tolerance)))
        << "actual: the kernels; expected: the CPU's. Elements are [token, head, dimension] of ["
        << tokens << ", " << heads << ", " << kv.head_dim() << "]";
  }
}

constexpr kvx::StorageType kF32 = kvx::StorageType::F32, kF16 = kvx::StorageType::F16,
                           kBf16 = kvx::StorageType::BF16, kQ8 = kvx::StorageType::Q8_0,
                           kQ4 = kvx::StorageType::Q4_0, kE4m3 = kvx::StorageType::F8_E4M3;

INSTANTIATE_TEST_SUITE_P(
    Caches, CudaSyntheticAttentionEmulationTest,
    ::testing::Values(
        AttentionCase{kF32, kF32, 80, 0, 0}, AttentionCase{kF16, kF16, 80, 0, 0},
        AttentionCase{kBf16, kBf16, 80, 0, 0},
        // The blocked types as insert-kv-cache rotates them (KeyRotationBlock,
        // ValueRotationBlock) and unrotated.
        AttentionCase{kQ8, kQ8, 64, 64, 64}, AttentionCase{kQ4, kQ4, 64, 64, 64},
        AttentionCase{kE4m3, kE4m3, 64, 64, 64}, AttentionCase{kQ8, kQ8, 128, 0, 0},
        AttentionCase{kQ4, kQ4, 128, 128, 64}, AttentionCase{kE4m3, kE4m3, 128, 0, 0},
        // Keys and values of different types, strides and rotations.
        AttentionCase{kQ8, kF16, 128, 128, 0}, AttentionCase{kF16, kQ4, 64, 0, 64},
        AttentionCase{kBf16, kE4m3, 128, 0, 64}, AttentionCase{kQ4, kF32, 64, 64, 0}),
    [](const ::testing::TestParamInfo<AttentionCase>& info) {
      std::string name = absl::StrCat(kvx::KvCacheTypesName(info.param.key_type, info.param.value_type),
                                      "_", info.param.head_dim, "_rot", info.param.key_rotation, "_",
                                      info.param.value_rotation);
      for (char& ch : name) {
        if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
      }
      return name;
    });

// stories260K's head_dim of 8 takes no blocked type (a 32-element block);
// those are the synthetic program's above.
INSTANTIATE_TEST_SUITE_P(Caches, CudaKernelEmulationTest, ::testing::Values("f32", "f16", "bf16"));

}  // namespace
}  // namespace kvjit::codegen::cuda
