#include "tools/kvjit/BenchStatistics.h"

#include <algorithm>

#include "absl/strings/str_format.h"

namespace kvjit::cli {

Spread SpreadOf(std::vector<double> values, bool integral) {
  Spread spread;
  spread.runs = static_cast<int64_t>(values.size());
  spread.integral = integral;
  if (values.empty()) return spread;
  std::sort(values.begin(), values.end());
  const size_t middle = values.size() / 2;
  spread.median = values.size() % 2 == 1 ? values[middle] : (values[middle - 1] + values[middle]) / 2;
  spread.min = values.front();
  spread.max = values.back();
  return spread;
}

nlohmann::json SpreadToJson(const Spread& spread) {
  return {{"median", spread.median}, {"min", spread.min}, {"max", spread.max}, {"runs", spread.runs}};
}

std::string FormatSpread(const Spread& spread, int decimals) {
  if (spread.runs == 0) return "-";
  if (spread.integral && spread.min == spread.max) return absl::StrFormat("%.0f", spread.median);
  const int places = spread.integral ? 1 : decimals;
  if (spread.min == spread.max) return absl::StrFormat("%.*f", places, spread.median);
  return absl::StrFormat("%.*f (%.*f-%.*f)", places, spread.median, places, spread.min, places,
                         spread.max);
}

std::vector<std::pair<std::string, Spread>> SummarizeRuns(const std::vector<nlohmann::json>& runs) {
  std::vector<std::string> keys;
  for (const nlohmann::json& run : runs) {
    for (const auto& [key, value] : run.items()) {
      if (value.is_number() && !value.is_boolean() &&
          std::find(keys.begin(), keys.end(), key) == keys.end()) {
        keys.push_back(key);
      }
    }
  }
  std::vector<std::pair<std::string, Spread>> summary;
  for (const std::string& key : keys) {
    std::vector<double> values;
    bool integral = true;
    for (const nlohmann::json& run : runs) {
      if (!run.contains(key) || !run[key].is_number()) continue;
      values.push_back(run[key].get<double>());
      integral = integral && run[key].is_number_integer();
    }
    summary.emplace_back(key, SpreadOf(std::move(values), integral));
  }
  return summary;
}

Spread Lookup(const std::vector<std::pair<std::string, Spread>>& summary, const std::string& key) {
  for (const auto& [name, spread] : summary) {
    if (name == key) return spread;
  }
  return Spread{};
}

}  // namespace kvjit::cli
