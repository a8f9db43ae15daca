#ifndef KVJIT_TOOLS_KVJIT_SPECULATIONREPORT_H_
#define KVJIT_TOOLS_KVJIT_SPECULATIONREPORT_H_

#include <cstdint>
#include <string>

namespace kvjit::cli {

// One line for --stats: "speculative NAME: D drafted, A accepted (P%) in V
// verify steps, mean accepted length L" (MeanAcceptedLength).
std::string SpeculationSummary(const std::string& name, int64_t drafted_tokens,
                               int64_t accepted_tokens, int64_t verify_steps);

}  // namespace kvjit::cli

#endif  // KVJIT_TOOLS_KVJIT_SPECULATIONREPORT_H_
