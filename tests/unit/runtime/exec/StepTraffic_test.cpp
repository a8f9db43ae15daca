#include "runtime/exec/StepTraffic.h"

#include <vector>

#include "flatbuffers/flatbuffers.h"
#include "gtest/gtest.h"

namespace kvjit::runtime {
namespace {

constexpr uint64_t kTableRows = 1000;
constexpr uint64_t kTableRowBytes = 64;
constexpr uint64_t kNormBytes = 256;
constexpr uint64_t kOutputBytes = 50'000;

// A program of embedding → rms_norm → linear, over a table of kTableRows
// rows; the linear reads `output_weight`: 0 (the table itself, tied) or 2.
std::vector<uint8_t> Program(uint32_t output_weight) {
  flatbuffers::FlatBufferBuilder fbb;
  auto weight_ref = [&](uint32_t index) {
    return kvx::CreateTensorRefDirect(fbb, kvx::BufferKind::Weight, index);
  };
  auto arena_ref = [&] { return kvx::CreateTensorRefDirect(fbb, kvx::BufferKind::Arena, 0); };
  const std::vector<int64_t> table_shape = {kTableRows, 16};
  const std::vector<int64_t> norm_shape = {16};
  const std::vector<int64_t> output_shape = {500, 16};
  std::vector<flatbuffers::Offset<kvx::Weight>> weights = {
      kvx::CreateWeightDirect(fbb, "token_embd.weight", kvx::StorageType::F32, &table_shape, 0, 0,
                              kTableRows * kTableRowBytes),
      kvx::CreateWeightDirect(fbb, "output_norm.weight", kvx::StorageType::F32, &norm_shape, 0, 0,
                              kNormBytes),
      kvx::CreateWeightDirect(fbb, "output.weight", kvx::StorageType::F32, &output_shape, 0, 0,
                              kOutputBytes)};
  std::vector<flatbuffers::Offset<kvx::TensorRef>> embedding_in = {
      weight_ref(0), kvx::CreateTensorRefDirect(fbb, kvx::BufferKind::Input, 0)};
  std::vector<flatbuffers::Offset<kvx::TensorRef>> norm_in = {arena_ref(), weight_ref(1)};
  std::vector<flatbuffers::Offset<kvx::TensorRef>> linear_in = {arena_ref(),
                                                                weight_ref(output_weight)};
  std::vector<flatbuffers::Offset<kvx::TensorRef>> out = {arena_ref()};
  std::vector<flatbuffers::Offset<kvx::Instruction>> instructions = {
      kvx::CreateInstructionDirect(fbb, kvx::OpCode::Embedding, &embedding_in, &out),
      kvx::CreateInstructionDirect(fbb, kvx::OpCode::RmsNorm, &norm_in, &out),
      kvx::CreateInstructionDirect(fbb, kvx::OpCode::Linear, &linear_in, &out)};
  auto program = kvx::CreateProgramDirect(fbb, &instructions, arena_ref());
  fbb.Finish(kvx::CreateExecutable(fbb, 0, 0, 0, 0, 0, fbb.CreateVector(weights), 0, program));
  return {fbb.GetBufferPointer(), fbb.GetBufferPointer() + fbb.GetSize()};
}

TEST(StepTrafficTest, AnUntiedTableCountsOneRowPerToken) {
  const std::vector<uint8_t> buffer = Program(/*output_weight=*/2);
  const kvx::Executable& executable = *kvx::GetExecutable(buffer.data());
  EXPECT_EQ(WeightBytesReadPerStep(executable, 1), kTableRowBytes + kNormBytes + kOutputBytes);
  EXPECT_EQ(WeightBytesReadPerStep(executable, 64),
            64 * kTableRowBytes + kNormBytes + kOutputBytes);
  // More tokens than rows read each row once at most.
  EXPECT_EQ(WeightBytesReadPerStep(executable, 5000),
            kTableRows * kTableRowBytes + kNormBytes + kOutputBytes);
}

TEST(StepTrafficTest, ATiedTableIsReadWholeByTheOutputProjection) {
  const std::vector<uint8_t> buffer = Program(/*output_weight=*/0);
  const kvx::Executable& executable = *kvx::GetExecutable(buffer.data());
  // output.weight is in the table but no instruction reads it.
  EXPECT_EQ(WeightBytesReadPerStep(executable, 1), kTableRows * kTableRowBytes + kNormBytes);
}

}  // namespace
}  // namespace kvjit::runtime
