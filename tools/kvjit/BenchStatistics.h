#ifndef KVJIT_TOOLS_KVJIT_BENCHSTATISTICS_H_
#define KVJIT_TOOLS_KVJIT_BENCHSTATISTICS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"

namespace kvjit::cli {

// One figure over a benchmark's runs: what a table reports instead of a run
// picked by hand.
struct Spread {
  double median = 0;
  double min = 0;
  double max = 0;
  int64_t runs = 0;
  bool integral = false;  // every run's value was an integer (a count)
};

// The median (the mean of the middle two for an even count) and range of
// `values`; integral says whether to print them as counts.
Spread SpreadOf(std::vector<double> values, bool integral);

// {"median", "min", "max", "runs"}.
nlohmann::json SpreadToJson(const Spread& spread);

// "412.3 (398.0-420.1)", or just the median where every run agreed.
std::string FormatSpread(const Spread& spread, int decimals);

// For each numeric field of the runs (JSON objects, e.g. one engine's
// measurements), in key order, the spread of its values over the runs that
// have it.
std::vector<std::pair<std::string, Spread>> SummarizeRuns(const std::vector<nlohmann::json>& runs);

// The spread of `key` in a summary; a zero-run spread where it is absent.
Spread Lookup(const std::vector<std::pair<std::string, Spread>>& summary, const std::string& key);

}  // namespace kvjit::cli

#endif  // KVJIT_TOOLS_KVJIT_BENCHSTATISTICS_H_
