#include "runtime/profile/StepProfiler.h"

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "runtime/exec/StepRunner.h"
#include "runtime/profile/ProfileSummary.h"
#include "runtime/profile/TraceWriter.h"
#include "tests/unit/runtime/exec/SmallProgram.h"

namespace kvjit::runtime {
namespace {

using Clock = StepObserver::Clock;

StepInputs Decode() {
  StepInputs inputs;
  inputs.tokens() = {1, 2};
  inputs.positions() = {4, 7};
  inputs.seq_starts() = {0, 1, 2};
  inputs.context_lens() = {5, 8};
  inputs.slot_mapping() = {4, 23};
  inputs.block_tables() = {0, 1};
  inputs.max_blocks = 1;
  inputs.logits_rows() = {0, 1};
  return inputs;
}

StepInputs Prefill() {
  StepInputs inputs;
  inputs.tokens() = {1, 2, 3, 4};
  inputs.positions() = {0, 1, 2, 3};
  inputs.seq_starts() = {0, 4};
  inputs.context_lens() = {4};
  inputs.slot_mapping() = {0, 1, 2, 3};
  inputs.block_tables() = {0};
  inputs.max_blocks = 1;
  inputs.logits_rows() = {3};
  return inputs;
}

class StepProfilerTest : public ::testing::Test {
 protected:
  // Runs a made-up step: instruction i from starts[i] to ends[i]
  // (nanoseconds after `origin`).
  void Step(const StepInputs& inputs, const std::vector<int64_t>& starts,
            const std::vector<int64_t>& ends) {
    profiler_.StepBegan(inputs);
    for (size_t i = 0; i < starts.size(); ++i) {
      profiler_.InstructionRan(i, origin_ + std::chrono::nanoseconds(starts[i]),
                               origin_ + std::chrono::nanoseconds(ends[i]));
    }
    profiler_.StepEnded();
    origin_ += std::chrono::milliseconds(1);
  }

  std::vector<uint8_t> buffer_ = testing::SmallProgram();
  const kvx::Executable& executable_ = *kvx::GetExecutable(buffer_.data());
  StepProfiler profiler_{executable_};
  Clock::time_point origin_ = Clock::now();
};

TEST_F(StepProfilerTest, SumsEachInstructionsTimeAndCostPerPhase) {
  Step(Prefill(), {100, 300, 700}, {300, 700, 1600});
  Step(Decode(), {0, 100, 400}, {100, 400, 500});
  Step(Decode(), {50, 150, 350}, {150, 350, 550});

  const PhaseProfile& decode = profiler_.phase(StepPhase::kDecode);
  EXPECT_EQ(decode.steps, 2);
  EXPECT_EQ(decode.tokens, 4);
  EXPECT_EQ(decode.nanoseconds, 500 + 500);  // first start to last end, each step
  EXPECT_EQ(decode.instructions[1].nanoseconds, 300 + 200);
  const InstructionCost linear =
      CostOf(executable_, *executable_.program()->instructions()->Get(1), {2, 2, 2, 1}, {});
  EXPECT_EQ(decode.instructions[1].cost.flops, 2 * linear.flops);
  EXPECT_EQ(decode.instructions[1].cost.weight_bytes, 2 * testing::kQ4_1WeightBytes);

  const PhaseProfile& prefill = profiler_.phase(StepPhase::kPrefill);
  EXPECT_EQ(prefill.steps, 1);
  EXPECT_EQ(prefill.nanoseconds, 1500);
  // The timeline starts at the step's first instruction.
  ASSERT_EQ(prefill.last_step.instruction_spans.size(), 3u);
  EXPECT_EQ(prefill.last_step.instruction_spans[0], (std::pair<int64_t, int64_t>{0, 200}));
  EXPECT_EQ(prefill.last_step.instruction_spans[2], (std::pair<int64_t, int64_t>{600, 1500}));
  EXPECT_EQ(prefill.last_step.sizes.tokens, 4);
}

TEST_F(StepProfilerTest, SummarizesPerStepByInstructionAndOpKind) {
  Step(Decode(), {0, 100, 400}, {100, 400, 500});
  Step(Decode(), {0, 100, 400}, {100, 300, 550});
  const std::vector<PhaseSummary> phases = SummarizeProfile(profiler_);
  ASSERT_EQ(phases.size(), 1u);  // no prefill step ran
  const PhaseSummary& decode = phases[0];
  EXPECT_EQ(decode.phase, StepPhase::kDecode);
  EXPECT_DOUBLE_EQ(decode.ms_per_step, 525e-6);
  EXPECT_DOUBLE_EQ(decode.tokens_per_step, 2);
  ASSERT_EQ(decode.instructions.size(), 3u);
  EXPECT_EQ(decode.instructions[1].name, "Linear blk.0.attn_q.weight");
  EXPECT_EQ(decode.instructions[2].name, "KvAttention layer 0");
  EXPECT_DOUBLE_EQ(decode.instructions[1].ms_per_step, 250e-6);
  EXPECT_DOUBLE_EQ(decode.instructions[1].share, 250.0 / 475);
  EXPECT_DOUBLE_EQ(decode.instructions[1].weight_bytes, testing::kQ4_1WeightBytes);
  // GB/s: bytes per step over the time per step.
  EXPECT_DOUBLE_EQ(decode.instructions[1].gb_per_s(),
                   decode.instructions[1].bytes() / 250e-9 / 1e9);
  // Op kinds, most time first.
  ASSERT_EQ(decode.ops.size(), 3u);
  EXPECT_EQ(decode.ops[0].name, "Linear");
  EXPECT_EQ(decode.ops[1].name, "KvAttention");
  EXPECT_EQ(decode.ops[2].name, "Embedding");
  EXPECT_EQ(decode.total.instructions, 3);
  // The time in instructions, less than the step's where they leave gaps.
  EXPECT_DOUBLE_EQ(decode.total.ms_per_step, 475e-6);

  const MachinePeaks peaks = {10, 100, "made up"};
  const std::string table = FormatProfile(phases, peaks, /*per_instruction=*/true);
  EXPECT_NE(table.find("decode: 2 steps of 2.0 tokens"), std::string::npos)
      << table;
  EXPECT_NE(table.find("1   Linear blk.0.attn_q.weight"), std::string::npos) << table;
  const nlohmann::json json = ProfileToJson(phases, peaks);
  EXPECT_EQ(json["phases"]["decode"]["ops"][0]["name"], "Linear");
  EXPECT_EQ(json["phases"]["decode"]["instructions"][1]["index"], 1);
  EXPECT_FALSE(json["phases"].contains("prefill"));
}

TEST_F(StepProfilerTest, TheTraceIsValidJsonWithInstructionsNestedInTheirStep) {
  Step(Prefill(), {100, 300, 700}, {300, 700, 1600});
  Step(Decode(), {0, 100, 400}, {100, 400, 500});
  TraceBuilder trace;
  AddStepTimelines(profiler_, /*pid=*/1, "kvjit f32", trace);
  const nlohmann::json parsed = nlohmann::json::parse(trace.ToJson().dump());
  std::map<int, nlohmann::json> steps;  // by track
  std::vector<nlohmann::json> instructions;
  for (const nlohmann::json& event : parsed["traceEvents"]) {
    if (event["ph"] == "M") continue;
    ASSERT_EQ(event["ph"], "X");
    ASSERT_TRUE(event["ts"].is_number() && event["dur"].is_number());
    if (event["cat"] == "step") {
      steps[event["tid"].get<int>()] = event;
    } else {
      instructions.push_back(event);
    }
  }
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_EQ(steps[1]["name"], "prefill step: 4 tokens, 1 sequence");
  EXPECT_DOUBLE_EQ(steps[1]["dur"].get<double>(), 1.5);  // microseconds
  ASSERT_EQ(instructions.size(), 6u);
  double previous_end = 0;
  int previous_tid = 0;
  for (const nlohmann::json& instruction : instructions) {
    const nlohmann::json& step = steps[instruction["tid"].get<int>()];
    const double start = instruction["ts"], end = start + instruction["dur"].get<double>();
    EXPECT_GE(start, step["ts"].get<double>());
    EXPECT_LE(end, step["ts"].get<double>() + step["dur"].get<double>() + 1e-9);
    // One after the other on its track.
    if (instruction["tid"] == previous_tid) EXPECT_GE(start, previous_end - 1e-9);
    previous_end = end;
    previous_tid = instruction["tid"];
  }
  EXPECT_EQ(instructions[4]["name"], "Linear blk.0.attn_q.weight");
  EXPECT_EQ(instructions[4]["args"]["weight_bytes"], testing::kQ4_1WeightBytes);
}

TEST(TraceBuilderTest, NamesTracksWithMetadataEvents) {
  TraceBuilder trace;
  trace.NameProcess(3, "engine");
  trace.NameThread(3, 1, "decode step");
  trace.Add({"Linear", "Linear", 3, 1, 1500, 250});
  const nlohmann::json json = trace.ToJson();
  ASSERT_EQ(json["traceEvents"].size(), 3u);
  EXPECT_EQ(json["traceEvents"][0]["args"]["name"], "engine");
  EXPECT_EQ(json["traceEvents"][1]["name"], "thread_name");
  EXPECT_DOUBLE_EQ(json["traceEvents"][2]["ts"].get<double>(), 1.5);
  EXPECT_DOUBLE_EQ(json["traceEvents"][2]["dur"].get<double>(), 0.25);
  EXPECT_FALSE(trace.WriteTo("/nonexistent-directory/trace.json").ok());
}

}  // namespace
}  // namespace kvjit::runtime
