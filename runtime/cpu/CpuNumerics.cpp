#include "runtime/cpu/CpuNumerics.h"

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace kvjit::cpu {

absl::string_view CpuNumericsName(CpuNumerics numerics) {
  switch (numerics) {
    case CpuNumerics::kBatchInvariant: return "batch-invariant";
    case CpuNumerics::kFast: return "fast";
  }
  return "unknown";  // Unreachable: the switch covers every enumerator.
}

absl::StatusOr<CpuNumerics> ParseCpuNumerics(absl::string_view name) {
  for (CpuNumerics numerics : {CpuNumerics::kBatchInvariant, CpuNumerics::kFast}) {
    if (name == CpuNumericsName(numerics)) return numerics;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown CPU numerics '", name, "': expected batch-invariant or fast"));
}

CpuNumerics ProcessCpuNumerics() {
  static const CpuNumerics numerics = [] {
    const char* name = std::getenv("KVJIT_CPU_NUMERICS");
    if (name == nullptr || *name == '\0') return CpuNumerics::kBatchInvariant;
    absl::StatusOr<CpuNumerics> parsed = ParseCpuNumerics(name);
    if (!parsed.ok()) {
      std::fprintf(stderr, "kvjit: KVJIT_CPU_NUMERICS: %s; using batch-invariant\n",
                   std::string(parsed.status().message()).c_str());
      return CpuNumerics::kBatchInvariant;
    }
    return *parsed;
  }();
  return numerics;
}

}  // namespace kvjit::cpu
