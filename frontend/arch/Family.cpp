#include "frontend/arch/Family.h"

namespace kvjit::arch {

std::optional<double> Family::DefaultOf(Param param, Format format) const {
  for (const Default& entry : defaults) {
    if (entry.param != param) continue;
    if (entry.config_json_only && format != Format::kConfigJson) break;
    return entry.value;
  }
  return Describe(param).fallback;
}

}  // namespace kvjit::arch
