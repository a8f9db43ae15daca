#ifndef KVJIT_CODEGEN_VERIFIER_VERIFIERTOLERANCE_H_
#define KVJIT_CODEGEN_VERIFIER_VERIFIERTOLERANCE_H_

#include <cstdint>
#include <string>

#include "absl/types/span.h"
#include "codegen/equivalence/EquivalenceSchedule.h"
#include "ir/Kv/KvAttrs.h"
#include "mlir/IR/BuiltinOps.h"

namespace kvjit::codegen {

// How far a compiled program's logits may be from the reference evaluator's
// (docs/numerics.md, "--verify"): in every row, the largest |difference| at
// most `fraction_of_range` of that reference row's logit range (max − min),
// and the compiled row's top choice no worse than that below the
// reference's best logit.
struct LogitTolerance {
  std::string weights;  // what the tolerance was chosen for: "f32/f16 weights", …
  double fraction_of_range = 0;
};

// By the storage types of the module's tfm.param weights: quantized matrices
// run with 8-bit activations on the CPU, whose rounding moves logits by up
// to about 1 (docs/numerics.md); bf16 weights with activations rounded to
// bf16; f32 and f16 weights leave only f32-vs-double accumulation and the
// f16 roundings of activations and cache.
LogitTolerance ToleranceFor(mlir::ModuleOp imported);

// For the CUDA kernels: the same fractions, whose margins also cover the
// prefill GEMMs' f16 operands (stories260K's worst row under the host
// emulation: 6.4e-4 of the range; docs/numerics.md).
LogitTolerance CudaToleranceFor(mlir::ModuleOp imported);

// `tolerance` for a program whose KV cache stores keys as `keys` and values
// as `values`, compared with the reference over a cache that rounds as they
// do: a q4_0 cache's 16 levels per block turn the program's small
// differences upstream (8-bit activations) into whole steps of a block's
// range, so it widens the bound; the other types leave it as it is.
LogitTolerance WithCacheRounding(const LogitTolerance& tolerance, kv::CacheElement keys,
                                 kv::CacheElement values);

// One step's comparison.
struct StepCheck {
  std::string step;  // "step 2 (chunked prefill of A …)"
  int64_t rows = 0;
  double max_abs_difference = 0;
  double max_fraction_of_range = 0;  // the worst row's max |difference| / its range
  // The worst row's root-mean-square difference / the reference row's
  // standard deviation.
  double max_rms_fraction = 0;
  int64_t rows_with_equal_argmax = 0;
  // Empty within tolerance; else the first row outside it, with its numbers.
  std::string failure;
};

// `actual` and `expected` hold the step's rows, [rows, vocab] each;
// `step_number` counts from 1.
StepCheck CompareStep(const ScheduledStep& step, int step_number, absl::Span<const float> actual,
                      absl::Span<const float> expected, const LogitTolerance& tolerance);

}  // namespace kvjit::codegen

#endif  // KVJIT_CODEGEN_VERIFIER_VERIFIERTOLERANCE_H_
