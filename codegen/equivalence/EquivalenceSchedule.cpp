#include "codegen/equivalence/EquivalenceSchedule.h"

#include <algorithm>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "ir/Reference/ReferenceGeneration.h"
#include "runtime/core/StatusMacros.h"
#include "runtime/schema/StepContract.h"

namespace kvjit::codegen {
namespace {

using reference::RefTensor;

// Hands out KV blocks in a stride-5 order over the pool (3, 0, 5, 2, … of
// 8), so that consecutive blocks of a sequence are never neighbours.
class ScrambledBlocks {
 public:
  explicit ScrambledBlocks(int64_t num_blocks) : num_blocks_(num_blocks) {}
  int32_t Next() { return static_cast<int32_t>((3 + 5 * handed_out_++) % num_blocks_); }

 private:
  int64_t num_blocks_;
  int64_t handed_out_ = 0;
};

struct SequenceState {
  int64_t cached = 0;
  std::vector<int32_t> blocks;
};

// `work`: (sequence, new tokens) in the order the step packs them.
ScheduledStep PackStep(std::string description, const std::vector<std::pair<int, int64_t>>& work,
                       const std::vector<std::vector<int32_t>>& sequences,
                       std::vector<SequenceState>& states, ScrambledBlocks& allocator,
                       int64_t block_size) {
  ScheduledStep step;
  step.description = std::move(description);
  using kvx::StepInput;
  runtime::StepInputs& inputs = step.inputs;
  runtime::StepInputs::Values& tokens = inputs[StepInput::Tokens];
  inputs[StepInput::SeqStarts] = {0};
  int64_t max_blocks = 1;
  for (const auto& [sequence, count] : work) {
    SequenceState& state = states[sequence];
    const int64_t end = state.cached + count;
    while (static_cast<int64_t>(state.blocks.size()) * block_size < end) {
      state.blocks.push_back(allocator.Next());
    }
    max_blocks = std::max<int64_t>(max_blocks, state.blocks.size());
    for (int64_t p = state.cached; p < end; ++p) {
      inputs[StepInput::LogitsRows].push_back(static_cast<int32_t>(tokens.size()));
      tokens.push_back(sequences[sequence][p]);
      inputs[StepInput::Positions].push_back(static_cast<int32_t>(p));
      inputs[StepInput::SlotMapping].push_back(
          static_cast<int32_t>(state.blocks[p / block_size] * block_size + p % block_size));
      step.rows.push_back({sequence, p});
    }
    inputs[StepInput::SeqStarts].push_back(static_cast<int32_t>(tokens.size()));
    inputs[StepInput::ContextLens].push_back(static_cast<int32_t>(end));
    state.cached = end;
  }
  inputs.max_blocks = max_blocks;
  runtime::StepInputs::Values& block_tables = inputs[StepInput::BlockTables];
  block_tables.assign(work.size() * max_blocks, 0);
  for (size_t s = 0; s < work.size(); ++s) {
    const std::vector<int32_t>& blocks = states[work[s].first].blocks;
    std::copy(blocks.begin(), blocks.end(), block_tables.begin() + s * max_blocks);
  }
  return step;
}

}  // namespace

EquivalenceSchedule MakeEquivalenceSchedule(int64_t vocab_size, int64_t block_size) {
  // A's first prefill stops three tokens short of a block, so that the
  // chunk after it crosses into A's second (scrambled) block.
  const int64_t first_prefill = std::max<int64_t>(1, block_size - 3);
  const int64_t a_length = first_prefill + 4 + 2;
  const int64_t b_length = 5 + 2;
  EquivalenceSchedule schedule;
  std::mt19937 random(/*seed=*/18);
  std::uniform_int_distribution<int32_t> token(0, static_cast<int32_t>(vocab_size - 1));
  for (int64_t length : {a_length, b_length}) {
    std::vector<int32_t> tokens(length);
    for (int32_t& t : tokens) t = token(random);
    schedule.sequences.push_back(std::move(tokens));
  }
  const auto blocks_for = [&](int64_t length) { return (length + block_size - 1) / block_size; };
  // Twice the blocks the sequences fill, so that the stride visits the whole
  // pool; not a multiple of the stride, so that it visits every block once.
  schedule.num_blocks = std::max<int64_t>(8, 2 * (blocks_for(a_length) + blocks_for(b_length)));
  if (schedule.num_blocks % 5 == 0) ++schedule.num_blocks;

  std::vector<SequenceState> states(2);
  ScrambledBlocks allocator(schedule.num_blocks);
  const auto add = [&](std::string description, std::vector<std::pair<int, int64_t>> work) {
    schedule.steps.push_back(PackStep(std::move(description), work, schedule.sequences, states,
                                      allocator, block_size));
  };
  constexpr int kA = 0, kB = 1;
  add(absl::StrCat("prefill of A (", first_prefill, " tokens)"), {{kA, first_prefill}});
  add("chunked prefill of A (4 tokens) + prefill of B (5)", {{kA, 4}, {kB, 5}});
  add("decode of A + decode of B", {{kA, 1}, {kB, 1}});
  add("decode of B + decode of A", {{kB, 1}, {kA, 1}});
  return schedule;
}

absl::StatusOr<std::vector<RefTensor>> EvaluateSequences(reference::ReferenceEvaluator& evaluator,
                                                         const std::string& function,
                                                         const EquivalenceSchedule& schedule) {
  std::vector<RefTensor> logits;
  for (const std::vector<int32_t>& tokens : schedule.sequences) {
    KVJIT_ASSIGN_OR_RETURN(RefTensor sequence_logits,
                           reference::EvaluateLogits(evaluator, function, tokens));
    logits.push_back(std::move(sequence_logits));
  }
  return logits;
}

std::vector<float> RowsOfStep(const std::vector<RefTensor>& sequence_logits,
                              const ScheduledStep& step) {
  const int64_t vocab = sequence_logits.front().shape[1];
  std::vector<float> rows;
  rows.reserve(step.rows.size() * vocab);
  for (const RowOrigin& origin : step.rows) {
    const std::vector<float>& values = sequence_logits[origin.sequence].values;
    rows.insert(rows.end(), values.begin() + origin.position * vocab,
                values.begin() + (origin.position + 1) * vocab);
  }
  return rows;
}

absl::StatusOr<RefTensor> EvaluateStep(reference::ReferenceEvaluator& evaluator,
                                       const std::string& function, const ScheduledStep& step) {
  const runtime::StepSizes sizes = runtime::SizesOf(step.inputs);
  std::vector<RefTensor> arguments;
  for (const kvx::StepInputSpec& spec : kvx::kStepInputs) {
    std::vector<int64_t> shape;
    for (int d = 0; d < spec.rank; ++d) shape.push_back(runtime::DimExtent(spec.dims[d], 0, sizes));
    arguments.push_back(RefTensor::Int(std::move(shape), step.inputs[spec.input]));
  }
  arguments.emplace_back();  // the cache: the evaluator's own
  KVJIT_ASSIGN_OR_RETURN(std::vector<RefTensor> results,
                         evaluator.Run(function, std::move(arguments)));
  if (results.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("@", function, " returned no logits"));
  }
  return std::move(results[0]);
}

}  // namespace kvjit::codegen
