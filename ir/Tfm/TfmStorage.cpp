#include "ir/Tfm/TfmStorage.h"

namespace kvjit::tfm {
namespace {

struct StoragePair {
  StorageType ir;
  quant::StorageType runtime;
};

constexpr StoragePair kStoragePairs[] = {
    {StorageType::f32, quant::StorageType::kF32},   {StorageType::f16, quant::StorageType::kF16},
    {StorageType::bf16, quant::StorageType::kBF16}, {StorageType::q8_0, quant::StorageType::kQ8_0},
    {StorageType::q4_0, quant::StorageType::kQ4_0}, {StorageType::q4_1, quant::StorageType::kQ4_1},
    {StorageType::q5_0, quant::StorageType::kQ5_0}, {StorageType::q5_1, quant::StorageType::kQ5_1},
    {StorageType::q4_k, quant::StorageType::kQ4_K}, {StorageType::q5_k, quant::StorageType::kQ5_K},
    {StorageType::q6_k, quant::StorageType::kQ6_K},
};

}  // namespace

quant::StorageType ToQuantStorage(StorageType storage) {
  for (const StoragePair& pair : kStoragePairs) {
    if (pair.ir == storage) return pair.runtime;
  }
  return quant::StorageType::kF32;
}

StorageType FromQuantStorage(quant::StorageType storage) {
  for (const StoragePair& pair : kStoragePairs) {
    if (pair.runtime == storage) return pair.ir;
  }
  return StorageType::f32;
}

}  // namespace kvjit::tfm
