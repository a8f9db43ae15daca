#include "runtime/exec/KvxTypes.h"

#include "absl/strings/str_cat.h"

namespace kvjit::runtime {
namespace {

struct StoragePair {
  quant::StorageType quant;
  kvx::StorageType kvx;
};

constexpr StoragePair kStoragePairs[] = {
    {quant::StorageType::kF32, kvx::StorageType::F32},
    {quant::StorageType::kF16, kvx::StorageType::F16},
    {quant::StorageType::kBF16, kvx::StorageType::BF16},
    {quant::StorageType::kQ8_0, kvx::StorageType::Q8_0},
    {quant::StorageType::kQ4_0, kvx::StorageType::Q4_0},
    {quant::StorageType::kQ4_1, kvx::StorageType::Q4_1},
    {quant::StorageType::kQ5_0, kvx::StorageType::Q5_0},
    {quant::StorageType::kQ5_1, kvx::StorageType::Q5_1},
    {quant::StorageType::kQ4_K, kvx::StorageType::Q4_K},
    {quant::StorageType::kQ5_K, kvx::StorageType::Q5_K},
    {quant::StorageType::kQ6_K, kvx::StorageType::Q6_K},
};

}  // namespace

kvx::StorageType ToKvxStorage(quant::StorageType storage) {
  for (const StoragePair& pair : kStoragePairs) {
    if (pair.quant == storage) return pair.kvx;
  }
  return kvx::StorageType::F32;
}

absl::StatusOr<quant::StorageType> FromKvxStorage(kvx::StorageType storage) {
  for (const StoragePair& pair : kStoragePairs) {
    if (pair.kvx == storage) return pair.quant;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown weight storage type ", static_cast<int>(storage)));
}

uint64_t Fnv1a64(absl::Span<const uint8_t> bytes) {
  uint64_t hash = 14695981039346656037ull;
  for (uint8_t byte : bytes) {
    hash ^= byte;
    hash *= 1099511628211ull;
  }
  return hash;
}

}  // namespace kvjit::runtime
