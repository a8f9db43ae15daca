#include "tests/unit/codegen/cuda/CudaTestExecutables.h"

#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>
#include <optional>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "codegen/driver/Compiler.h"
#include "runtime/core/StatusMacros.h"
#include "runtime/schema/KvCacheFormat.h"
#include "runtime/schema/OpOperands.h"
#include "tests/unit/runtime/schema/InputsByOperand.h"

namespace kvjit::codegen::cuda::testing {
namespace {

using flatbuffers::Offset;
using kvjit::testing::InputsByOperand;

constexpr int64_t kHidden = 256;
constexpr int64_t kFeatures = 8;
constexpr int64_t kHeads = 6;
constexpr int64_t kKvHeads = 2;
constexpr int64_t kBlockSize = 16;

// An instruction's parameter table and its type in the OpParams union.
struct InstructionParams {
  kvx::OpParams type = kvx::OpParams::NONE;
  Offset<void> table;
};

class SyntheticBuilder {
 public:
  std::string Build(const SyntheticCache& cache) {
    const int64_t kHeadDim = cache.head_dim;
    const kvx::Dim tokens(kvx::DimKind::Tokens, 0);
    const kvx::Dim logits_rows(kvx::DimKind::LogitsRows, 0);
    auto hidden = [&](kvx::Dim rows) { return Arena({rows, Static(kHidden)}); };

    using Linear = kvx::LinearOperand;
    for (kvx::StorageType storage :
         {kvx::StorageType::F32, kvx::StorageType::F16, kvx::StorageType::BF16,
          kvx::StorageType::Q8_0, kvx::StorageType::Q4_0, kvx::StorageType::Q4_1,
          kvx::StorageType::Q5_0, kvx::StorageType::Q5_1, kvx::StorageType::Q4_K,
          kvx::StorageType::Q5_K, kvx::StorageType::Q6_K}) {
      Add(kvx::OpCode::Linear,
          InputsByOperand<Linear>({{Linear::X, hidden(tokens)},
                                   {Linear::Weight, Weight(storage, {kFeatures, kHidden})}}),
          {Arena({tokens, Static(kFeatures)})});
    }
    Add(kvx::OpCode::Linear,
        InputsByOperand<Linear>(
            {{Linear::X, hidden(tokens)},
             {Linear::Weight, Weight(kvx::StorageType::Q8_0, {kFeatures, kHidden})},
             {Linear::Bias, Weight(kvx::StorageType::F32, {kFeatures})}}),
        {Arena({tokens, Static(kFeatures)})});
    Add(kvx::OpCode::Linear,
        InputsByOperand<Linear>(
            {{Linear::X, hidden(logits_rows)},
             {Linear::Weight, Weight(kvx::StorageType::Q4_K, {kFeatures, kHidden})},
             {Linear::Bias, Weight(kvx::StorageType::F16, {kFeatures})}}),
        {Arena({logits_rows, Static(kFeatures)})});
    using Embedding = kvx::EmbeddingOperand;
    Add(kvx::OpCode::Embedding,
        InputsByOperand<Embedding>(
            {{Embedding::Table, Weight(kvx::StorageType::Q6_K, {32, kHidden})},
             {Embedding::Tokens, Input(kvx::StepInput::Tokens, {tokens})}}),
        {hidden(tokens)});
    using RmsNorm = kvx::RmsNormOperand;
    Add(kvx::OpCode::RmsNorm,
        InputsByOperand<RmsNorm>({{RmsNorm::X, hidden(tokens)},
                                  {RmsNorm::Weight, Weight(kvx::StorageType::F16, {kHidden})}}),
        {hidden(tokens)}, Params(kvx::CreateRmsNormParams(fbb_, 1e-6f)));
    using AddRmsNorm = kvx::AddRmsNormOperand;
    Add(kvx::OpCode::AddRmsNorm,
        InputsByOperand<AddRmsNorm>(
            {{AddRmsNorm::A, hidden(tokens)},
             {AddRmsNorm::B, hidden(tokens)},
             {AddRmsNorm::Weight, Weight(kvx::StorageType::BF16, {kHidden})}}),
        {hidden(tokens), hidden(tokens)}, Params(kvx::CreateRmsNormParams(fbb_, 1e-5f)));
    using SwiGlu = kvx::SwiGluOperand;
    Add(kvx::OpCode::SwiGlu,
        InputsByOperand<SwiGlu>({{SwiGlu::Gate, hidden(tokens)}, {SwiGlu::Up, hidden(tokens)}}),
        {hidden(tokens)});

    auto heads = [&](int64_t count) { return Arena({tokens, Static(count), Static(kHeadDim)}); };
    const auto positions = Input(kvx::StepInput::Positions, {tokens});
    using Rope = kvx::RopeOperand;
    Add(kvx::OpCode::Rope,
        InputsByOperand<Rope>({{Rope::X, heads(kHeads)}, {Rope::Positions, positions}}),
        {heads(kHeads)},
        Params(RopeParams(kvx::RopeStyle::NeoX, 500000.0f, 64, kvx::RopeScalingKind::Llama3)));
    Add(kvx::OpCode::Rope,
        InputsByOperand<Rope>({{Rope::X, heads(kKvHeads)}, {Rope::Positions, positions}}),
        {heads(kKvHeads)},
        Params(RopeParams(kvx::RopeStyle::Interleaved, 10000.0f, 0, kvx::RopeScalingKind::Linear)));

    const std::vector<kvx::ElementwiseStep> steps = {
        kvx::ElementwiseStep(kvx::ElementwiseOpCode::Add, 0, 1, 0.0f),
        kvx::ElementwiseStep(kvx::ElementwiseOpCode::Mul, -1, 0, 0.0f),
        kvx::ElementwiseStep(kvx::ElementwiseOpCode::Scale, -2, -2, 0.5f),
        kvx::ElementwiseStep(kvx::ElementwiseOpCode::Silu, -3, -3, 0.0f),
        kvx::ElementwiseStep(kvx::ElementwiseOpCode::Gelu, -4, -4, 0.0f),
        kvx::ElementwiseStep(kvx::ElementwiseOpCode::GeluTanh, -5, -5, 0.0f),
        kvx::ElementwiseStep(kvx::ElementwiseOpCode::Tanh, -6, -6, 0.0f)};
    Add(kvx::OpCode::Elementwise, {hidden(tokens), hidden(tokens)}, {hidden(tokens)},
        Params(kvx::CreateElementwiseParamsDirect(fbb_, &steps)));

    using KvWrite = kvx::KvWriteOperand;
    Add(kvx::OpCode::KvWrite,
        InputsByOperand<KvWrite>(
            {{KvWrite::Key, heads(kKvHeads)},
             {KvWrite::Value, heads(kKvHeads)},
             {KvWrite::SlotMapping, Input(kvx::StepInput::SlotMapping, {tokens})}}),
        {}, Params(kvx::CreateKvWriteParams(fbb_, /*layer=*/1)));
    const kvx::Dim sequences(kvx::DimKind::Sequences, 0);
    using Attention = kvx::KvAttentionOperand;
    Add(kvx::OpCode::KvAttention,
        InputsByOperand<Attention>(
            {{Attention::Query, heads(kHeads)},
             {Attention::Positions, positions},
             {Attention::SeqStarts,
              Input(kvx::StepInput::SeqStarts, {kvx::Dim(kvx::DimKind::SequencesPlusOne, 0)})},
             {Attention::ContextLens, Input(kvx::StepInput::ContextLens, {sequences})},
             {Attention::BlockTables, Input(kvx::StepInput::BlockTables,
                                            {sequences, kvx::Dim(kvx::DimKind::MaxBlocks, 0)})}}),
        {heads(kHeads)},
        Params(kvx::CreateKvAttentionParams(fbb_, /*layer=*/1,
                                            1.0f / std::sqrt(static_cast<float>(kHeadDim)))));
    using GatherRows = kvx::GatherRowsOperand;
    Add(kvx::OpCode::GatherRows,
        InputsByOperand<GatherRows>(
            {{GatherRows::X, hidden(tokens)},
             {GatherRows::Rows, Input(kvx::StepInput::LogitsRows, {logits_rows})}}),
        {hidden(logits_rows)});
    Add(kvx::OpCode::Copy,
        InputsByOperand<kvx::CopyOperand>({{kvx::CopyOperand::X, hidden(tokens)}}),
        {Arena({tokens, Static(2), Static(kHidden / 2)})});

    auto logits = Arena({logits_rows, Static(kFeatures)});
    auto program = kvx::CreateProgramDirect(fbb_, &instructions_, logits, arena_end_, 64);
    // A type that is not a cache type, or a head_dim that is not a whole
    // number of its blocks, gets a stride of a byte per element: a layout
    // for code generation to refuse.
    auto slot_bytes = [&](kvx::StorageType type) -> uint64_t {
      const kvx::KvCacheFormat* format = kvx::FindKvCacheFormat(type);
      std::optional<uint64_t> bytes = format ? kvx::KvSlotBytes(*format, kKvHeads, kHeadDim) : std::nullopt;
      return bytes.value_or(kKvHeads * kHeadDim);
    };
    const uint64_t key_stride = slot_bytes(cache.key_type);
    const uint64_t value_stride = slot_bytes(cache.value_type);
    const uint64_t value_offset = key_stride * kBlockSize;
    const uint64_t layer_stride = value_offset + value_stride * kBlockSize;
    auto kv = kvx::CreateKvLayout(fbb_, 2, kKvHeads, kHeadDim, kBlockSize, cache.key_type, 2 * layer_stride,
                                  layer_stride, value_offset, key_stride, 16, cache.value_type, value_stride,
                                  static_cast<uint32_t>(cache.key_rotation),
                                  static_cast<uint32_t>(cache.value_rotation));
    auto config = kvx::CreateModelConfigDirect(fbb_, "llama", "synthetic", kFeatures);
    auto root =
        kvx::CreateExecutableDirect(fbb_, 0, nullptr, config, 0, nullptr, &weights_, kv, program);
    kvx::FinishExecutableBuffer(fbb_, root);
    return std::string(reinterpret_cast<const char*>(fbb_.GetBufferPointer()), fbb_.GetSize());
  }

 private:
  static kvx::Dim Static(int64_t size) { return kvx::Dim(kvx::DimKind::Static, size); }

  // A fresh stretch of arena for each reference, so that no Copy is in place.
  Offset<kvx::TensorRef> Arena(const std::vector<kvx::Dim>& shape) {
    const uint64_t offset = arena_end_;
    arena_end_ += 1 << 20;
    return kvx::CreateTensorRefDirect(fbb_, kvx::BufferKind::Arena, 0, offset, &shape);
  }

  Offset<kvx::TensorRef> Input(kvx::StepInput input, const std::vector<kvx::Dim>& shape) {
    return kvx::CreateTensorRefDirect(fbb_, kvx::BufferKind::Input, static_cast<uint32_t>(input), 0,
                                      &shape);
  }

  Offset<kvx::TensorRef> Weight(kvx::StorageType storage, const std::vector<int64_t>& shape) {
    const uint32_t index = static_cast<uint32_t>(weights_.size());
    weights_.push_back(
        kvx::CreateWeightDirect(fbb_, absl::StrCat("w", index).c_str(), storage, &shape));
    std::vector<kvx::Dim> dims;
    for (int64_t size : shape) dims.push_back(Static(size));
    return kvx::CreateTensorRefDirect(fbb_, kvx::BufferKind::Weight, index, 0, &dims);
  }

  template <typename T>
  static InstructionParams Params(Offset<T> table) {
    return {kvx::OpParamsTraits<T>::enum_value, table.Union()};
  }

  Offset<kvx::RopeParams> RopeParams(kvx::RopeStyle style, float theta, uint32_t rotary_dim,
                                     kvx::RopeScalingKind scaling) {
    auto scaling_table = kvx::CreateRopeScaling(fbb_, scaling, 8.0f, 1.0f, 4.0f, 8192);
    return kvx::CreateRopeParams(fbb_, style, theta, rotary_dim, scaling_table);
  }

  void Add(kvx::OpCode op, const std::vector<Offset<kvx::TensorRef>>& inputs,
           const std::vector<Offset<kvx::TensorRef>>& outputs,
           InstructionParams params = {}) {
    instructions_.push_back(kvx::CreateInstruction(fbb_, op, fbb_.CreateVector(inputs),
                                                   fbb_.CreateVector(outputs), params.type,
                                                   params.table));
  }

  flatbuffers::FlatBufferBuilder fbb_;
  std::vector<Offset<kvx::Weight>> weights_;
  std::vector<Offset<kvx::Instruction>> instructions_;
  uint64_t arena_end_ = 0;
};

}  // namespace

absl::StatusOr<std::string> CompiledExecutable(const std::string& model_path,
                                               const std::string& cache_dtype) {
  static std::mutex mutex;
  static auto* compiled = new std::map<std::pair<std::string, std::string>, std::string>();
  std::lock_guard<std::mutex> lock(mutex);
  auto found = compiled->find({model_path, cache_dtype});
  if (found != compiled->end()) return found->second;

  const std::filesystem::path path =
      std::filesystem::temp_directory_path() /
      absl::StrCat("kvjit-cuda-codegen-test-", getpid(), "-", compiled->size(), ".kvx");
  CompileOptions options;
  options.cache_dtype = cache_dtype;
  KVJIT_RETURN_IF_ERROR(CompileModel(model_path, path.string(), options, nullptr));
  std::ifstream file(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  std::filesystem::remove(path);
  // Its sidecar stays while the process runs (the bytes name it, and tests
  // load them) and goes when it exits: each run left up to 92 MB in /tmp.
  static auto* sidecars = new std::vector<std::filesystem::path>();
  if (sidecars->empty()) {
    std::atexit([] {
      for (const std::filesystem::path& sidecar : *sidecars) {
        std::error_code ignored;
        std::filesystem::remove(sidecar, ignored);
      }
    });
  }
  sidecars->push_back(std::filesystem::path(path).replace_extension(".kvw"));
  return compiled->emplace(std::make_pair(model_path, cache_dtype), std::move(bytes)).first->second;
}

std::string SyntheticExecutable(kvx::StorageType cache) {
  return SyntheticBuilder().Build({cache, cache, 80, 0, 0});
}

std::string SyntheticExecutable(const SyntheticCache& cache) { return SyntheticBuilder().Build(cache); }

}  // namespace kvjit::codegen::cuda::testing
