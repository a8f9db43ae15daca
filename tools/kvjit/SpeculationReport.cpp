#include "tools/kvjit/SpeculationReport.h"

#include "absl/strings/str_format.h"
#include "runtime/generation/Speculation.h"

namespace kvjit::cli {

std::string SpeculationSummary(const std::string& name, int64_t drafted_tokens,
                               int64_t accepted_tokens, int64_t verify_steps) {
  return absl::StrFormat(
      "speculative %s: %d drafted, %d accepted (%.1f%%) in %d verify steps, mean accepted "
      "length %.2f",
      name, drafted_tokens, accepted_tokens,
      drafted_tokens > 0 ? 100.0 * static_cast<double>(accepted_tokens) / drafted_tokens : 0.0,
      verify_steps, runtime::MeanAcceptedLength(accepted_tokens, verify_steps));
}

}  // namespace kvjit::cli
