#ifndef KVJIT_TESTS_UNIT_CODEGEN_CUDA_CUDATESTEXECUTABLES_H_
#define KVJIT_TESTS_UNIT_CODEGEN_CUDA_CUDATESTEXECUTABLES_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "runtime/schema/kvx_generated.h"

// Executables to generate CUDA kernels from, shared by the codegen tests.
namespace kvjit::codegen::cuda::testing {

// The CPU executable `kvjit compile` writes for the model at `model_path`
// with a KV cache of `cache_dtype` (any --cache_dtype), as bytes; compiled once
// per process for each pair.
absl::StatusOr<std::string> CompiledExecutable(const std::string& model_path,
                                               const std::string& cache_dtype);

// A program no real model has, written to reach every kernel variant: a
// Linear over each storage type (with an f32 and an f16 bias, and over
// logits rows), an Embedding of Q6_K rows, RmsNorm and AddRmsNorm with f16
// and bf16 weights, SwiGlu, rope in both styles with partial rotation and
// both scalings, every elementwise op, attention with 3 query heads per kv
// head and a head_dim of 80 (not a multiple of 32), KvWrite, GatherRows and
// a Copy. Its weights have no bytes: it is for code generation only.
std::string SyntheticExecutable(kvx::StorageType cache);

// The same program over a cache of `key_type` keys and `value_type` values
// (any of KvCacheFormat.h's; the blocked types need head_dim a multiple of
// 32), rotated in blocks of key_rotation and value_rotation (0: none), with
// heads of head_dim elements. Another type or head_dim gives a layout the
// kernels refuse (a byte per element), for the tests of that.
struct SyntheticCache {
  kvx::StorageType key_type = kvx::StorageType::F32;
  kvx::StorageType value_type = kvx::StorageType::F32;
  int64_t head_dim = 80;
  int64_t key_rotation = 0;
  int64_t value_rotation = 0;
};
std::string SyntheticExecutable(const SyntheticCache& cache);

}  // namespace kvjit::codegen::cuda::testing

#endif  // KVJIT_TESTS_UNIT_CODEGEN_CUDA_CUDATESTEXECUTABLES_H_
