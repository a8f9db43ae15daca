#include "runtime/profile/ProfileSummary.h"

#include <algorithm>
#include <map>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "runtime/exec/OpTable.h"

namespace kvjit::runtime {
namespace {

void AddPerStep(const InstructionTotals& totals, double steps, ProfileRow& row) {
  row.ms_per_step += totals.nanoseconds / 1e6 / steps;
  row.weight_bytes += totals.cost.weight_bytes / steps;
  row.activation_bytes += totals.cost.activation_bytes / steps;
  row.kv_bytes += totals.cost.kv_bytes / steps;
  row.flops += totals.cost.flops / steps;
}

std::string Percent(double value, double of) {
  return of > 0 ? absl::StrFormat("%.1f%%", 100 * value / of) : std::string("-");
}

void AppendHeader(std::string& text, const char* first_column) {
  absl::StrAppendFormat(&text, "%-40s %6s %9s %6s %10s %10s %8s %9s %8s %7s %8s %7s\n",
                        first_column, "instr", "ms/step", "share", "weight MB", "activ. MB",
                        "KV MB", "MFLOP", "GB/s", "of bw", "GFLOP/s", "of peak");
}

void AppendRow(std::string& text, const std::string& name, const ProfileRow& row,
               const MachinePeaks& peaks) {
  absl::StrAppendFormat(&text, "%-40s %6d %9.3f %5.1f%% %10.3f %10.3f %8.3f %9.3f %8.2f %7s %8.2f %7s\n",
                        name, row.instructions, row.ms_per_step, 100 * row.share,
                        row.weight_bytes / 1e6, row.activation_bytes / 1e6, row.kv_bytes / 1e6,
                        row.flops / 1e6, row.gb_per_s(), Percent(row.gb_per_s(), peaks.read_bandwidth_gb_s),
                        row.gflop_per_s(), Percent(row.gflop_per_s(), peaks.peak_gflop_s));
}

nlohmann::json RowToJson(const ProfileRow& row) {
  return {{"name", row.name},
          {"instructions", row.instructions},
          {"ms_per_step", row.ms_per_step},
          {"share", row.share},
          {"weight_bytes", row.weight_bytes},
          {"activation_bytes", row.activation_bytes},
          {"kv_bytes", row.kv_bytes},
          {"flops", row.flops},
          {"gb_per_s", row.gb_per_s()},
          {"gflop_per_s", row.gflop_per_s()}};
}

}  // namespace

std::string InstructionName(const kvx::Executable& executable, const kvx::Instruction& instruction) {
  std::string name = kvx::EnumNameOpCode(instruction.op());
  for (const kvx::TensorRef* ref : *instruction.inputs()) {
    if (ref->kind() == kvx::BufferKind::Weight) {
      return absl::StrCat(name, " ", executable.weights()->Get(ref->index())->name()->str());
    }
  }
  if (const std::optional<uint32_t> layer = KvCacheLayer(instruction)) {
    absl::StrAppend(&name, " layer ", *layer);
  }
  return name;
}

std::vector<PhaseSummary> SummarizeProfile(const StepProfiler& profiler) {
  const kvx::Executable& executable = profiler.executable();
  const auto& instructions = *executable.program()->instructions();
  std::vector<PhaseSummary> summaries;
  for (StepPhase phase : kStepPhases) {
    const PhaseProfile& profile = profiler.phase(phase);
    if (profile.steps == 0) continue;
    const double steps = static_cast<double>(profile.steps);
    PhaseSummary summary;
    summary.phase = phase;
    summary.steps = profile.steps;
    summary.tokens_per_step = profile.tokens / steps;
    summary.ms_per_step = profile.nanoseconds / 1e6 / steps;
    summary.total.name = "all instructions";
    std::map<kvx::OpCode, ProfileRow> by_op;
    for (size_t i = 0; i < instructions.size(); ++i) {
      const kvx::Instruction& instruction = *instructions[i];
      ProfileRow row;
      row.name = InstructionName(executable, instruction);
      row.instructions = 1;
      AddPerStep(profile.instructions[i], steps, row);
      ProfileRow& op = by_op[instruction.op()];
      op.name = kvx::EnumNameOpCode(instruction.op());
      ++op.instructions;
      AddPerStep(profile.instructions[i], steps, op);
      ++summary.total.instructions;
      AddPerStep(profile.instructions[i], steps, summary.total);
      summary.instructions.push_back(std::move(row));
    }
    for (auto& [op, row] : by_op) summary.ops.push_back(row);
    std::stable_sort(summary.ops.begin(), summary.ops.end(),
                     [](const ProfileRow& a, const ProfileRow& b) { return a.ms_per_step > b.ms_per_step; });
    // Shares of the time in instructions, which the gaps between them (the
    // runner's own work, the profiler's clock reads) make a little less than
    // the step's.
    const double in_instructions = summary.total.ms_per_step;
    for (auto* rows : {&summary.ops, &summary.instructions}) {
      for (ProfileRow& row : *rows) row.share = in_instructions > 0 ? row.ms_per_step / in_instructions : 0;
    }
    summary.total.share = 1;
    summaries.push_back(std::move(summary));
  }
  return summaries;
}

std::string FormatProfile(const std::vector<PhaseSummary>& phases, const MachinePeaks& peaks,
                          bool per_instruction) {
  std::string text = absl::StrFormat(
      "against %.1f GB/s measured read bandwidth and %.1f GFLOP/s peak (%s)\n",
      peaks.read_bandwidth_gb_s, peaks.peak_gflop_s, peaks.peak_source);
  for (const PhaseSummary& phase : phases) {
    absl::StrAppendFormat(&text, "%s: %d step%s of %.1f tokens, %.3f ms per step\n",
                          StepPhaseName(phase.phase), phase.steps, phase.steps == 1 ? "" : "s",
                          phase.tokens_per_step, phase.ms_per_step);
    AppendHeader(text, "op");
    for (const ProfileRow& row : phase.ops) AppendRow(text, row.name, row, peaks);
    AppendRow(text, phase.total.name, phase.total, peaks);
    if (!per_instruction) continue;
    AppendHeader(text, "#   instruction");
    for (size_t i = 0; i < phase.instructions.size(); ++i) {
      AppendRow(text, absl::StrFormat("%-4d%s", i, phase.instructions[i].name),
                phase.instructions[i], peaks);
    }
  }
  return text;
}

nlohmann::json ProfileToJson(const std::vector<PhaseSummary>& phases, const MachinePeaks& peaks) {
  nlohmann::json json = {{"read_bandwidth_gb_s", peaks.read_bandwidth_gb_s},
                         {"peak_gflop_s", peaks.peak_gflop_s},
                         {"peak_source", peaks.peak_source},
                         {"phases", nlohmann::json::object()}};
  for (const PhaseSummary& phase : phases) {
    nlohmann::json ops = nlohmann::json::array(), instructions = nlohmann::json::array();
    for (const ProfileRow& row : phase.ops) ops.push_back(RowToJson(row));
    for (size_t i = 0; i < phase.instructions.size(); ++i) {
      nlohmann::json row = RowToJson(phase.instructions[i]);
      row["index"] = i;
      instructions.push_back(std::move(row));
    }
    json["phases"][StepPhaseName(phase.phase)] = {{"steps", phase.steps},
                                                  {"tokens_per_step", phase.tokens_per_step},
                                                  {"ms_per_step", phase.ms_per_step},
                                                  {"total", RowToJson(phase.total)},
                                                  {"ops", ops},
                                                  {"instructions", instructions}};
  }
  return json;
}

}  // namespace kvjit::runtime
