#include "tools/serve/bench/BenchServeReport.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

namespace kvjit::bench_serve {
namespace {

// numpy.percentile's default: linear between the closest ranks.
double Percentile(std::vector<double> values, double percent) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const double rank = percent / 100.0 * static_cast<double>(values.size() - 1);
  const size_t below = static_cast<size_t>(std::floor(rank));
  const size_t above = std::min(below + 1, values.size() - 1);
  return values[below] + (values[above] - values[below]) * (rank - static_cast<double>(below));
}

nlohmann::json LatencyJson(const std::vector<double>& seconds) {
  std::vector<double> ms;
  for (double s : seconds) ms.push_back(s * 1e3);
  const double mean =
      ms.empty() ? 0 : std::accumulate(ms.begin(), ms.end(), 0.0) / static_cast<double>(ms.size());
  return {{"mean", mean}, {"median", Percentile(ms, 50)}, {"p99", Percentile(ms, 99)}};
}

int64_t OutputTokens(const RequestTiming& timing, const BenchServeRequest& request,
                     const tokenizer::Tokenizer* tokenizer, std::string* source) {
  if (timing.completion_tokens >= 0) {
    *source = "usage";
    return timing.completion_tokens;
  }
  // "length" is max_tokens reached (the prompts leave room in the context).
  if (timing.finish_reason == "length") {
    *source = "max_tokens";
    return request.max_tokens;
  }
  if (tokenizer != nullptr) {
    absl::StatusOr<std::vector<int32_t>> tokens =
        tokenizer->Encode(timing.text, /*add_special=*/false, /*parse_special=*/false);
    if (tokens.ok()) {
      *source = "tokenizer";
      return static_cast<int64_t>(tokens->size());
    }
  }
  *source = "chunks";
  return timing.text_chunks;
}

}  // namespace

absl::StatusOr<ServiceLevelObjectives> ParseServiceLevelObjectives(absl::string_view text) {
  ServiceLevelObjectives objectives;
  if (text.empty()) return objectives;
  for (absl::string_view item : absl::StrSplit(text, ',')) {
    std::pair<absl::string_view, absl::string_view> pair = absl::StrSplit(item, ':');
    double ms = 0;
    if (!absl::SimpleAtod(pair.second, &ms) || ms <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("--goodput: '", item, "' is not NAME:MILLISECONDS (ttft, tpot or e2el)"));
    }
    if (pair.first == "ttft") {
      objectives.ttft_ms = ms;
    } else if (pair.first == "tpot") {
      objectives.tpot_ms = ms;
    } else if (pair.first == "e2el") {
      objectives.e2el_ms = ms;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("--goodput: unknown objective '", pair.first, "' (ttft, tpot or e2el)"));
    }
  }
  return objectives;
}

nlohmann::json SummarizeServeRun(const ServeRun& run, const tokenizer::Tokenizer* tokenizer,
                                 const ServiceLevelObjectives& objectives) {
  int64_t completed = 0, input_tokens = 0, output_tokens = 0, good = 0;
  bool inputs_known = true;
  std::string output_source;
  std::vector<double> ttft, tpot, itl, e2el;
  std::vector<std::string> errors;
  for (size_t i = 0; i < run.timings.size(); ++i) {
    const RequestTiming& timing = run.timings[i];
    if (!timing.ok) {
      if (errors.size() < 5) errors.push_back(timing.error);
      continue;
    }
    ++completed;
    const int64_t prompt_tokens =
        timing.prompt_tokens >= 0 ? timing.prompt_tokens : run.requests[i].prompt_tokens;
    if (prompt_tokens < 0) inputs_known = false;
    input_tokens += std::max<int64_t>(prompt_tokens, 0);
    const int64_t tokens = OutputTokens(timing, run.requests[i], tokenizer, &output_source);
    output_tokens += tokens;
    ttft.push_back(timing.time_to_first_token_s);
    e2el.push_back(timing.end_to_end_s);
    itl.insert(itl.end(), timing.inter_token_latencies_s.begin(),
               timing.inter_token_latencies_s.end());
    std::optional<double> request_tpot;
    if (tokens > 1) {
      request_tpot = (timing.end_to_end_s - timing.time_to_first_token_s) /
                     static_cast<double>(tokens - 1);
      tpot.push_back(*request_tpot);
    }
    const bool meets = (!objectives.ttft_ms || timing.time_to_first_token_s * 1e3 <= *objectives.ttft_ms) &&
                       (!objectives.tpot_ms || !request_tpot || *request_tpot * 1e3 <= *objectives.tpot_ms) &&
                       (!objectives.e2el_ms || timing.end_to_end_s * 1e3 <= *objectives.e2el_ms);
    good += meets ? 1 : 0;
  }
  const double duration = std::max(run.duration_s, 1e-9);
  nlohmann::json summary = {
      {"label", run.label},
      {"completed", completed},
      {"failed", static_cast<int64_t>(run.timings.size()) - completed},
      {"duration_s", run.duration_s},
      {"request_throughput", completed / duration},
      {"output_throughput", output_tokens / duration},
      {"total_output_tokens", output_tokens},
      {"output_tokens_from", output_source},
      {"ttft_ms", LatencyJson(ttft)},
      {"tpot_ms", LatencyJson(tpot)},
      {"itl_ms", LatencyJson(itl)},
      {"e2el_ms", LatencyJson(e2el)},
  };
  if (inputs_known) {
    summary["total_input_tokens"] = input_tokens;
    summary["total_token_throughput"] = (input_tokens + output_tokens) / duration;
  }
  if (objectives.ttft_ms || objectives.tpot_ms || objectives.e2el_ms) {
    summary["goodput"] = good / duration;
  }
  if (!errors.empty()) summary["first_errors"] = errors;
  return summary;
}

void PrintServeTable(const std::vector<nlohmann::json>& summaries) {
  struct Row {
    const char* title;
    std::string key;
    std::string sub;
    int decimals;
  };
  const std::vector<Row> rows = {
      {"Successful requests", "completed", "", 0},
      {"Failed requests", "failed", "", 0},
      {"Benchmark duration (s)", "duration_s", "", 2},
      {"Total input tokens", "total_input_tokens", "", 0},
      {"Total generated tokens", "total_output_tokens", "", 0},
      {"Request throughput (req/s)", "request_throughput", "", 2},
      {"Output token throughput (tok/s)", "output_throughput", "", 1},
      {"Total token throughput (tok/s)", "total_token_throughput", "", 1},
      {"Goodput (req/s)", "goodput", "", 2},
      {"Mean TTFT (ms)", "ttft_ms", "mean", 1},
      {"Median TTFT (ms)", "ttft_ms", "median", 1},
      {"P99 TTFT (ms)", "ttft_ms", "p99", 1},
      {"Mean TPOT (ms)", "tpot_ms", "mean", 2},
      {"Median TPOT (ms)", "tpot_ms", "median", 2},
      {"P99 TPOT (ms)", "tpot_ms", "p99", 2},
      {"Mean ITL (ms)", "itl_ms", "mean", 2},
      {"Median ITL (ms)", "itl_ms", "median", 2},
      {"P99 ITL (ms)", "itl_ms", "p99", 2},
      {"Mean E2EL (ms)", "e2el_ms", "mean", 1},
      {"Median E2EL (ms)", "e2el_ms", "median", 1},
      {"P99 E2EL (ms)", "e2el_ms", "p99", 1},
  };
  std::printf("%-34s", "");
  for (const nlohmann::json& summary : summaries) {
    std::printf(" %16s", summary["label"].get<std::string>().c_str());
  }
  std::printf("\n");
  for (const Row& row : rows) {
    std::printf("%-34s", row.title);
    for (const nlohmann::json& summary : summaries) {
      const nlohmann::json* value = summary.contains(row.key) ? &summary[row.key] : nullptr;
      if (value != nullptr && !row.sub.empty()) value = &(*value)[row.sub];
      if (value == nullptr || !value->is_number()) {
        std::printf(" %16s", "-");
      } else {
        std::printf(" %16s", absl::StrFormat("%.*f", row.decimals, value->get<double>()).c_str());
      }
    }
    std::printf("\n");
  }
  std::fflush(stdout);
}

}  // namespace kvjit::bench_serve
