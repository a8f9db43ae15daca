#ifndef KVJIT_RUNTIME_EXEC_STEPTRAFFIC_H_
#define KVJIT_RUNTIME_EXEC_STEPTRAFFIC_H_

#include <cstdint>

#include "runtime/schema/kvx_generated.h"

namespace kvjit::runtime {

// The bytes of weights one step of `tokens` new tokens reads: every weight an
// instruction other than Embedding reads, whole; of a table that only
// Embedding reads (an untied model's token embeddings), one row per token, at
// most every row. A tied table is read whole by the output projection anyway.
// The count a bandwidth figure divides by: counting a 49,152-row embedding
// table whole would credit a decode step with bytes it never touches.
uint64_t WeightBytesReadPerStep(const kvx::Executable& executable, int64_t tokens);

}  // namespace kvjit::runtime

#endif  // KVJIT_RUNTIME_EXEC_STEPTRAFFIC_H_
