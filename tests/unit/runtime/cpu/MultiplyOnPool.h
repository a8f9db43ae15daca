#ifndef KVJIT_TESTS_UNIT_RUNTIME_CPU_MULTIPLYONPOOL_H_
#define KVJIT_TESTS_UNIT_RUNTIME_CPU_MULTIPLYONPOOL_H_

#include <cmath>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "runtime/cpu/MatMul.h"

namespace kvjit::cpu::testing {

// MatMul of `tokens` rows of x on a pool of `threads` under `isa` and
// `numerics`, its status expected ok; y starts as NaNs, so that an output the
// kernels left unwritten fails the comparisons.
inline std::vector<float> MultiplyOnPool(const WeightView& w, const std::vector<float>& x, int64_t tokens,
                                         int threads, CpuIsa isa,
                                         CpuNumerics numerics = CpuNumerics::kBatchInvariant) {
  ThreadPool pool(threads);
  std::vector<float> y(static_cast<size_t>(tokens * w.rows), std::nanf(""));
  const absl::Status status = MatMul(w, x.data(), tokens, y.data(), pool, isa, numerics);
  EXPECT_TRUE(status.ok()) << status;
  return y;
}

}  // namespace kvjit::cpu::testing

#endif  // KVJIT_TESTS_UNIT_RUNTIME_CPU_MULTIPLYONPOOL_H_
