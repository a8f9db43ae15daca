#ifndef KVJIT_RUNTIME_SCHEMA_STEPCONTRACT_H_
#define KVJIT_RUNTIME_SCHEMA_STEPCONTRACT_H_

#include <array>
#include <cstdint>
#include <iterator>

#include "runtime/schema/EnumTable.h"
#include "runtime/schema/kvx_generated.h"

// The step function's inputs, stated once, in kStepInputs below, for the
// compiler and the runtime. Everything else about them derives from that
// table:
//  - insert-kv-cache gives the step function one argument per row, in order
//    (passes/InsertKvCache.cpp), and the executable writer checks them;
//  - runtime::StepInputs holds one array per row, indexed by kvx::StepInput;
//  - runtime::ValidateStep checks each array's size against its row's dims
//    (both runners call it);
//  - the CUDA runner sizes its input buffers from the dims at the largest
//    step, and pads decode steps by each row's `decode_padding`
//    (runtime/cuda/DecodePadding.h);
//  - the producers (runtime/generation/StepBuilder.cpp,
//    codegen/equivalence/EquivalenceSchedule.cpp) fill the arrays by kvx::StepInput.
// Adding a step input is a kvx::StepInput value (kvx.fbs), its row here, and
// the code that computes its values in the producers; the static_assert
// below fails the build until the row is here, in the enum's order.
namespace kvjit::kvx {

// The element of every step input: BufferKind::Input refers to an int32
// array (kvx.fbs), the step function's arguments are tensors of i32, and
// the kernels read int32_t.
using StepInputElement = int32_t;

inline constexpr int kMaxStepInputRank = 2;

// What the padding sequences of a decode step padded to a CUDA graph's
// batch (runtime/cuda/DecodePadding.h) hold in an input, element by element:
// `row` is the element's index along the input's first dimension.
enum class DecodePadding {
  kZero,
  kOne,
  kRow,           // the row's own index
  kPaddingSlot,   // slot 0 of the padding block
  kPaddingBlock,  // the padding block
};

struct StepInputSpec {
  StepInput input;
  // As the step contract and the step function's arguments name it.
  const char* name;
  int rank;
  // Row-major; the first `rank` entries count. The array's size is their
  // product at the step's sizes (runtime::StepInputElements).
  std::array<DimKind, kMaxStepInputRank> dims;
  DecodePadding decode_padding;
};

// In the order of kvx::StepInput, which BufferKind::Input's index and the
// step function's argument order follow.
inline constexpr StepInputSpec kStepInputs[] = {
    {StepInput::Tokens, "tokens", 1, {DimKind::Tokens}, DecodePadding::kZero},
    {StepInput::Positions, "positions", 1, {DimKind::Tokens}, DecodePadding::kZero},
    {StepInput::SeqStarts, "seq_starts", 1, {DimKind::SequencesPlusOne}, DecodePadding::kRow},
    {StepInput::ContextLens, "context_lens", 1, {DimKind::Sequences}, DecodePadding::kOne},
    {StepInput::SlotMapping, "slot_mapping", 1, {DimKind::Tokens}, DecodePadding::kPaddingSlot},
    {StepInput::BlockTables, "block_tables", 2, {DimKind::Sequences, DimKind::MaxBlocks},
     DecodePadding::kPaddingBlock},
    {StepInput::LogitsRows, "logits_rows", 1, {DimKind::LogitsRows}, DecodePadding::kRow},
};

inline constexpr int kStepInputCount = static_cast<int>(std::size(kStepInputs));

static_assert(CoversEnumInOrder(kStepInputs, &StepInputSpec::input),
              "kStepInputs has one row per kvx::StepInput, in the enum's order");

constexpr const StepInputSpec& SpecOf(StepInput input) {
  return kStepInputs[static_cast<int>(input)];
}

// The input whose length is the step's size of `kind` (T, L or S): the first
// one-dimensional input over `kind` alone. The block tables' columns have
// none; a step states them apart (runtime::StepInputs::max_blocks).
constexpr StepInput InputCounting(DimKind kind) {
  for (const StepInputSpec& spec : kStepInputs) {
    if (spec.rank == 1 && spec.dims[0] == kind) return spec.input;
  }
  return StepInput::MAX;
}

static_assert(SpecOf(InputCounting(DimKind::Tokens)).dims[0] == DimKind::Tokens &&
                  SpecOf(InputCounting(DimKind::LogitsRows)).dims[0] == DimKind::LogitsRows &&
                  SpecOf(InputCounting(DimKind::Sequences)).dims[0] == DimKind::Sequences,
              "some step input counts each of T, L and S");

}  // namespace kvjit::kvx

#endif  // KVJIT_RUNTIME_SCHEMA_STEPCONTRACT_H_
