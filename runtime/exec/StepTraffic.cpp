#include "runtime/exec/StepTraffic.h"

#include <algorithm>
#include <vector>

namespace kvjit::runtime {

uint64_t WeightBytesReadPerStep(const kvx::Executable& executable, int64_t tokens) {
  const auto& weights = *executable.weights();
  enum class Use { kNone, kRowsOnly, kWhole };
  std::vector<Use> uses(weights.size(), Use::kNone);
  for (const kvx::Instruction* instruction : *executable.program()->instructions()) {
    for (const kvx::TensorRef* input : *instruction->inputs()) {
      if (input->kind() != kvx::BufferKind::Weight || input->index() >= uses.size()) continue;
      Use& use = uses[input->index()];
      if (instruction->op() != kvx::OpCode::Embedding) {
        use = Use::kWhole;
      } else if (use == Use::kNone) {
        use = Use::kRowsOnly;
      }
    }
  }
  uint64_t bytes = 0;
  for (size_t i = 0; i < uses.size(); ++i) {
    const kvx::Weight& weight = *weights[i];
    if (uses[i] == Use::kWhole) {
      bytes += weight.size_bytes();
    } else if (uses[i] == Use::kRowsOnly) {
      const int64_t rows = weight.shape() != nullptr && weight.shape()->size() > 0
                               ? std::max<int64_t>(weight.shape()->Get(0), 1)
                               : 1;
      bytes += weight.size_bytes() / rows * std::min(tokens, rows);
    }
  }
  return bytes;
}

}  // namespace kvjit::runtime
