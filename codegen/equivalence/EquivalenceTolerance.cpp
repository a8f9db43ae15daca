#include "codegen/equivalence/EquivalenceTolerance.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "ir/Tfm/TfmOps.h"

namespace kvjit::codegen {
namespace {

// Calibrated in docs/numerics.md ("--verify"): the default pipeline's worst
// row and a sabotaged pass's best row, on stories260K, SmolLM2 and
// random-weight Qwen2 and Llama models.
constexpr double kFloatWeightsFraction = 5e-3;
// bf16 weights multiply activations rounded to bf16 (8 significant bits, as
// ggml does), 8x coarser than the f16 rounding of f16 weights.
constexpr double kBf16WeightsFraction = 3e-2;
constexpr double kQuantizedWeightsFraction = 0.15;
// SmolLM2-135M Q4_1 with a q4_0 cache: 0.28 of the range in its worst row
// (docs/numerics.md, "Quantized KV caches").
constexpr double kQ4CacheFraction = 0.35;

bool IsQuantized(tfm::StorageType storage) {
  return storage != tfm::StorageType::f32 && storage != tfm::StorageType::f16 &&
         storage != tfm::StorageType::bf16;
}

// The quantized storage types of the module's weights, by name.
std::set<std::string> QuantizedStorages(mlir::ModuleOp imported) {
  std::set<std::string> quantized;
  for (auto param : imported.getOps<tfm::ParamOp>()) {
    if (IsQuantized(param.getStorage())) {
      quantized.insert(tfm::stringifyStorageType(param.getStorage()).str());
    }
  }
  return quantized;
}

bool HasBf16Weights(mlir::ModuleOp imported) {
  for (auto param : imported.getOps<tfm::ParamOp>()) {
    if (param.getStorage() == tfm::StorageType::bf16) return true;
  }
  return false;
}

}  // namespace

LogitTolerance WithCacheRounding(const LogitTolerance& tolerance, kv::CacheElement keys,
                                 kv::CacheElement values) {
  if (keys != kv::CacheElement::q4_0 && values != kv::CacheElement::q4_0) return tolerance;
  return {absl::StrCat(tolerance.weights, ", a q4_0 KV cache"),
          std::max(tolerance.fraction_of_range, kQ4CacheFraction)};
}

LogitTolerance ToleranceFor(mlir::ModuleOp imported) {
  const std::set<std::string> quantized = QuantizedStorages(imported);
  if (quantized.empty() && HasBf16Weights(imported)) {
    return {"bf16 weights with bf16-rounded activations", kBf16WeightsFraction};
  }
  if (quantized.empty()) return {"f32/f16 weights", kFloatWeightsFraction};
  return {absl::StrCat("quantized weights (", absl::StrJoin(quantized, ", "),
                       ") with 8-bit activations"),
          kQuantizedWeightsFraction};
}

LogitTolerance CudaToleranceFor(mlir::ModuleOp imported) {
  const std::set<std::string> quantized = QuantizedStorages(imported);
  if (quantized.empty()) {
    return {"f32/f16/bf16 weights, f16 operands in the prefill GEMMs", kFloatWeightsFraction};
  }
  return {absl::StrCat("quantized weights (", absl::StrJoin(quantized, ", "),
                       "), f16 operands in the prefill GEMMs"),
          kQuantizedWeightsFraction};
}

StepCheck CompareStep(const ScheduledStep& step, int step_number, absl::Span<const float> actual,
                      absl::Span<const float> expected, const LogitTolerance& tolerance) {
  StepCheck check;
  check.step = absl::StrCat("step ", step_number, " (", step.description, ")");
  check.rows = static_cast<int64_t>(step.rows.size());
  if (actual.size() != expected.size() || expected.empty() || expected.size() % check.rows != 0) {
    check.failure = absl::StrFormat("%s: %d logits, where the reference has %d for %d rows",
                                    check.step, actual.size(), expected.size(), check.rows);
    return check;
  }
  const size_t vocab = expected.size() / check.rows;
  for (int64_t row = 0; row < check.rows; ++row) {
    const absl::Span<const float> got = actual.subspan(row * vocab, vocab);
    const absl::Span<const float> want = expected.subspan(row * vocab, vocab);
    double worst = 0, low = want[0], high = want[0], squared_difference = 0, sum = 0,
           squared_sum = 0;
    size_t worst_token = 0, got_argmax = 0, want_argmax = 0;
    bool finite = true;
    for (size_t i = 0; i < vocab; ++i) {
      // A NaN compares false with everything: it must fail, not vanish.
      if (!std::isfinite(got[i])) finite = false;
      const double difference = std::abs(static_cast<double>(got[i]) - want[i]);
      if (difference > worst) worst = difference, worst_token = i;
      squared_difference += difference * difference;
      sum += want[i];
      squared_sum += static_cast<double>(want[i]) * want[i];
      low = std::min<double>(low, want[i]);
      high = std::max<double>(high, want[i]);
      if (got[i] > got[got_argmax]) got_argmax = i;
      if (want[i] > want[want_argmax]) want_argmax = i;
    }
    const double range = high - low;
    // The floor keeps a constant reference row (range 0) from demanding
    // bit-equality.
    const double allowed = tolerance.fraction_of_range * std::max(range, 1e-3);
    const double fraction = worst / std::max(range, 1e-3);
    check.max_abs_difference = std::max(check.max_abs_difference, worst);
    check.max_fraction_of_range = std::max(check.max_fraction_of_range, fraction);
    const double mean = sum / vocab;
    const double deviation = std::sqrt(std::max(squared_sum / vocab - mean * mean, 1e-12));
    const double rms_fraction = std::sqrt(squared_difference / vocab) / deviation;
    check.max_rms_fraction = std::max(check.max_rms_fraction, rms_fraction);
    if (got_argmax == want_argmax) ++check.rows_with_equal_argmax;
    if (!check.failure.empty()) continue;
    const RowOrigin origin = step.rows[row];
    const std::string where = absl::StrFormat("%s, logit row %d (sequence %c, position %d)",
                                              check.step, row, 'A' + origin.sequence,
                                              origin.position);
    if (!finite) {
      check.failure = absl::StrCat(where, ": a logit is not finite");
    } else if (worst > allowed) {
      check.failure = absl::StrFormat(
          "%s: max |diff| %.4g at token %d is %.3g of the row's logit range %.4g, above the %.3g "
          "allowed for %s",
          where, worst, worst_token, fraction, range, tolerance.fraction_of_range,
          tolerance.weights);
    } else if (want[want_argmax] - want[got_argmax] > allowed) {
      // Within tolerance elementwise, yet a close call must not become a
      // clearly worse choice.
      check.failure = absl::StrFormat(
          "%s: the top token %d has reference logit %.4g, %.4g below the reference's top token "
          "%d, more than the %.4g allowed for %s",
          where, got_argmax, want[got_argmax], want[want_argmax] - want[got_argmax], want_argmax,
          allowed, tolerance.weights);
    }
  }
  return check;
}

}  // namespace kvjit::codegen
