#ifndef KVJIT_RUNTIME_SCHEMA_STEPCONTRACT_H_
#define KVJIT_RUNTIME_SCHEMA_STEPCONTRACT_H_

#include <array>
#include <cstdint>

#include "runtime/schema/kvx_generated.h"

// The step function's inputs (DESIGN.md, "The step function"), stated once
// for the compiler and the runtime: the executable writer checks the step
// function's arguments against it, and the runners size, fill and validate
// their step buffers from it. Adding a step input is a kvx::StepInput value,
// its row here, and the code that produces it (runtime::StepInputs, the
// engines' step packing, insert-kv-cache's argument).
namespace kvjit::kvx {

// Every step input is an array of these (BufferKind::Input).
using StepInputElement = int32_t;

inline constexpr int kMaxStepInputRank = 2;

struct StepInputSpec {
  StepInput input;
  // As the step contract and the step function's arguments name it.
  const char* name;
  int rank;
  // Row-major; the first `rank` entries count.
  std::array<DimKind, kMaxStepInputRank> dims;
};

// In the order of kvx::StepInput, which BufferKind::Input's index and the
// step function's argument order follow.
inline constexpr StepInputSpec kStepInputs[] = {
    {StepInput::Tokens, "tokens", 1, {DimKind::Tokens}},
    {StepInput::Positions, "positions", 1, {DimKind::Tokens}},
    {StepInput::SeqStarts, "seq_starts", 1, {DimKind::SequencesPlusOne}},
    {StepInput::ContextLens, "context_lens", 1, {DimKind::Sequences}},
    {StepInput::SlotMapping, "slot_mapping", 1, {DimKind::Tokens}},
    {StepInput::BlockTables, "block_tables", 2, {DimKind::Sequences, DimKind::MaxBlocks}},
    {StepInput::LogitsRows, "logits_rows", 1, {DimKind::LogitsRows}},
};

inline constexpr int kStepInputCount = static_cast<int>(std::size(kStepInputs));

constexpr bool StepInputsFollowTheEnum() {
  for (int i = 0; i < kStepInputCount; ++i) {
    if (static_cast<int>(kStepInputs[i].input) != i) return false;
  }
  return kStepInputCount == static_cast<int>(StepInput::MAX) + 1;
}
static_assert(StepInputsFollowTheEnum(),
              "kStepInputs has one row per kvx::StepInput, in the enum's order");

constexpr const StepInputSpec& SpecOf(StepInput input) {
  return kStepInputs[static_cast<int>(input)];
}

}  // namespace kvjit::kvx

#endif  // KVJIT_RUNTIME_SCHEMA_STEPCONTRACT_H_
