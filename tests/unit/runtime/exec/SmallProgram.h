#ifndef KVJIT_TESTS_UNIT_RUNTIME_EXEC_SMALLPROGRAM_H_
#define KVJIT_TESTS_UNIT_RUNTIME_EXEC_SMALLPROGRAM_H_

#include <cstdint>
#include <vector>

#include "flatbuffers/flatbuffers.h"
#include "runtime/schema/OpOperands.h"
#include "runtime/schema/StepContract.h"
#include "runtime/schema/kvx_generated.h"
#include "tests/unit/runtime/schema/InputsByOperand.h"

namespace kvjit::runtime::testing {

// A step program of three instructions, for cost and profile tests:
//   0 Embedding  token_embd.weight (F32 [100, 32]), tokens → arena [T, 32]
//   1 Linear     arena [T, 32] × blk.0.attn_q.weight (Q4_1 [64, 32]) → arena [T, 64]
//   2 KvAttention arena [T, 4, 16], positions, seq_starts, context_lens,
//                block_tables → arena [T, 4, 16], over an f16 cache of 2 KV
//                heads of 16.
constexpr int64_t kHidden = 32, kOutFeatures = 64, kTableRows = 100;
constexpr int64_t kHeads = 4, kKvHeads = 2, kHeadDim = 16;
constexpr uint64_t kTableBytes = kTableRows * kHidden * 4;
// Q4_1 blocks of 32 weights: an f16 scale, an f16 minimum and 16 bytes of nibbles.
constexpr uint64_t kQ4_1WeightBytes = kOutFeatures * (kHidden / 32) * 20;

inline std::vector<uint8_t> SmallProgram() {
  flatbuffers::FlatBufferBuilder fbb;
  using Dims = std::vector<kvx::Dim>;
  const kvx::Dim tokens(kvx::DimKind::Tokens, 0);
  auto stat = [](int64_t size) { return kvx::Dim(kvx::DimKind::Static, size); };
  auto arena = [&](uint64_t offset, const Dims& shape) {
    return kvx::CreateTensorRefDirect(fbb, kvx::BufferKind::Arena, 0, offset, &shape);
  };
  // A step input with the shape the step contract gives it.
  auto input = [&](kvx::StepInput which) {
    const kvx::StepInputSpec& spec = kvx::SpecOf(which);
    Dims shape;
    for (int d = 0; d < spec.rank; ++d) shape.emplace_back(spec.dims[d], 0);
    return kvx::CreateTensorRefDirect(fbb, kvx::BufferKind::Input, static_cast<uint32_t>(which), 0,
                                      &shape);
  };
  auto weight = [&](uint32_t index) {
    return kvx::CreateTensorRefDirect(fbb, kvx::BufferKind::Weight, index);
  };
  const std::vector<int64_t> table_shape = {kTableRows, kHidden};
  const std::vector<int64_t> q_shape = {kOutFeatures, kHidden};
  std::vector<flatbuffers::Offset<kvx::Weight>> weights = {
      kvx::CreateWeightDirect(fbb, "token_embd.weight", kvx::StorageType::F32, &table_shape, 0, 0,
                              kTableBytes),
      kvx::CreateWeightDirect(fbb, "blk.0.attn_q.weight", kvx::StorageType::Q4_1, &q_shape, 0, 0,
                              kQ4_1WeightBytes)};
  using kvjit::testing::InputsByOperand;
  using Embedding = kvx::EmbeddingOperand;
  std::vector<flatbuffers::Offset<kvx::TensorRef>> embedding_in = InputsByOperand<Embedding>(
      {{Embedding::Table, weight(0)}, {Embedding::Tokens, input(kvx::StepInput::Tokens)}});
  std::vector<flatbuffers::Offset<kvx::TensorRef>> embedding_out = {arena(0, {tokens, stat(kHidden)})};
  using Linear = kvx::LinearOperand;
  std::vector<flatbuffers::Offset<kvx::TensorRef>> linear_in = InputsByOperand<Linear>(
      {{Linear::X, arena(0, {tokens, stat(kHidden)})}, {Linear::Weight, weight(1)}});
  std::vector<flatbuffers::Offset<kvx::TensorRef>> linear_out = {
      arena(4096, {tokens, stat(kOutFeatures)})};
  const Dims query = {tokens, stat(kHeads), stat(kHeadDim)};
  using Attention = kvx::KvAttentionOperand;
  std::vector<flatbuffers::Offset<kvx::TensorRef>> attention_in =
      InputsByOperand<Attention>({{Attention::Query, arena(4096, query)},
                                  {Attention::Positions, input(kvx::StepInput::Positions)},
                                  {Attention::SeqStarts, input(kvx::StepInput::SeqStarts)},
                                  {Attention::ContextLens, input(kvx::StepInput::ContextLens)},
                                  {Attention::BlockTables, input(kvx::StepInput::BlockTables)}});
  std::vector<flatbuffers::Offset<kvx::TensorRef>> attention_out = {arena(0, query)};
  std::vector<flatbuffers::Offset<kvx::Instruction>> instructions = {
      kvx::CreateInstructionDirect(fbb, kvx::OpCode::Embedding, &embedding_in, &embedding_out),
      kvx::CreateInstructionDirect(fbb, kvx::OpCode::Linear, &linear_in, &linear_out),
      kvx::CreateInstructionDirect(
          fbb, kvx::OpCode::KvAttention, &attention_in, &attention_out,
          kvx::OpParams::KvAttentionParams,
          kvx::CreateKvAttentionParams(fbb, /*layer=*/0, /*scale=*/0.25f).Union())};
  auto logits = arena(0, {kvx::Dim(kvx::DimKind::LogitsRows, 0), stat(kHidden)});
  auto program = kvx::CreateProgramDirect(fbb, &instructions, logits);
  auto kv_layout = kvx::CreateKvLayout(fbb, 1, kKvHeads, kHeadDim, 16, kvx::StorageType::F16, 0, 0, 0, 0, 0,
                                       kvx::StorageType::F16);
  fbb.Finish(kvx::CreateExecutable(fbb, 0, 0, 0, 0, 0, fbb.CreateVector(weights), kv_layout, program));
  return {fbb.GetBufferPointer(), fbb.GetBufferPointer() + fbb.GetSize()};
}

}  // namespace kvjit::runtime::testing

#endif  // KVJIT_TESTS_UNIT_RUNTIME_EXEC_SMALLPROGRAM_H_
