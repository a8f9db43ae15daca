#ifndef KVJIT_RUNTIME_EXEC_INSTRUCTIONCOST_H_
#define KVJIT_RUNTIME_EXEC_INSTRUCTIONCOST_H_

#include <cstdint>

#include "absl/types/span.h"
#include "runtime/exec/Executable.h"
#include "runtime/schema/kvx_generated.h"

namespace kvjit::runtime {

// What attention reads in a step, beyond the step's sizes: it depends on how
// far each sequence has come.
struct AttentionExtent {
  // Over the step's tokens, the keys each one attends to (position + 1).
  int64_t query_key_pairs = 0;
  // Over the step's sequences, the tokens in their KV cache (context_lens).
  int64_t cached_tokens = 0;
};

AttentionExtent AttentionExtentOf(absl::Span<const int32_t> positions,
                                  absl::Span<const int32_t> context_lens);

// The memory an instruction touches and the arithmetic it does in one step,
// derived from its operands' shapes and storage types: a figure to divide a
// measured time by, not a count of the kernels' instructions.
struct InstructionCost {
  // Weights in their stored (quantized) size: whole for every op but
  // Embedding, which reads one row per token.
  uint64_t weight_bytes = 0;
  // Arena operands and results (f32) and step inputs (i32), each once.
  uint64_t activation_bytes = 0;
  // KV cache entries written (KvWrite) or read (KvAttention), in the cache's
  // element type.
  uint64_t kv_bytes = 0;
  // Floating-point operations: a multiply-add is two; an exp, erf or
  // division is one.
  uint64_t flops = 0;
  // What a collective (AllReduce, AllGather) hands the other ranks: its
  // input, which the network or the interconnect carries rather than this
  // machine's memory, so bytes() leaves it out.
  uint64_t collective_bytes = 0;

  uint64_t bytes() const { return weight_bytes + activation_bytes + kv_bytes; }
  InstructionCost& operator+=(const InstructionCost& other);
};

// Elements of `ref` in a step of `sizes`; a weight's whole.
int64_t ElementsOf(const kvx::Executable& executable, const kvx::TensorRef& ref,
                   const StepSizes& sizes);

// `instruction`'s cost in a step of `sizes` whose attention reaches
// `attention`. Instructions come from a loaded (verified) executable.
InstructionCost CostOf(const kvx::Executable& executable, const kvx::Instruction& instruction,
                       const StepSizes& sizes, const AttentionExtent& attention);

}  // namespace kvjit::runtime

#endif  // KVJIT_RUNTIME_EXEC_INSTRUCTIONCOST_H_
