// How insert-kv-cache stores keys and values: cache-dtype for both, or
// cache-dtype-k and cache-dtype-v apart (llama.cpp's -ctk/-ctv); the
// quantized ones rotated in Walsh-Hadamard blocks of 64 (head_dim 64 here)
// unless rotation=none.
// RUN: kvjit-opt %s --allow-unregistered-dialect --insert-kv-cache="cache-dtype=q8_0" | FileCheck %s --check-prefix=BOTH
// RUN: kvjit-opt %s --allow-unregistered-dialect --insert-kv-cache="cache-dtype=f16 cache-dtype-k=q4_0" | FileCheck %s --check-prefix=KEYS
// RUN: kvjit-opt %s --allow-unregistered-dialect --insert-kv-cache="cache-dtype-v=f8_e4m3" | FileCheck %s --check-prefix=VALUES
// RUN: kvjit-opt %s --allow-unregistered-dialect --insert-kv-cache="cache-dtype=bf16" | FileCheck %s --check-prefix=BF16
// RUN: kvjit-opt %s --allow-unregistered-dialect --insert-kv-cache="cache-dtype=q8_0 rotation=none" | FileCheck %s --check-prefix=UNROTATED
// RUN: not kvjit-opt %s --allow-unregistered-dialect --insert-kv-cache="cache-dtype=q8_0 rotation=some" 2>&1 | FileCheck %s --check-prefix=ROTATION
// RUN: not kvjit-opt %s --allow-unregistered-dialect --insert-kv-cache="cache-dtype=q5_1" 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// RUN: not kvjit-opt %s --allow-unregistered-dialect --insert-kv-cache="cache-dtype-v=int8" 2>&1 | FileCheck %s --check-prefix=UNKNOWN-V

// BOTH-LABEL: func.func @step(
// BOTH-SAME: !kv.cache<layers = 1, kv_heads = 2, head_dim = 64, block_size = 16, key_type = q8_0, value_type = q8_0, key_rotation = 64, value_rotation = 64>
// KEYS-LABEL: func.func @step(
// KEYS-SAME: !kv.cache<layers = 1, kv_heads = 2, head_dim = 64, block_size = 16, key_type = q4_0, value_type = f16, key_rotation = 64>
// VALUES-LABEL: func.func @step(
// VALUES-SAME: !kv.cache<layers = 1, kv_heads = 2, head_dim = 64, block_size = 16, key_type = f32, value_type = f8_e4m3, value_rotation = 64>
// BF16-LABEL: func.func @step(
// BF16-SAME: key_type = bf16, value_type = bf16>
// UNROTATED-LABEL: func.func @step(
// UNROTATED-SAME: key_type = q8_0, value_type = q8_0>
// ROTATION: error: rotation must be auto or none, got 'some'
// UNKNOWN: error: cache-dtype must be one of f32, f16, bf16, q8_0, q4_0, f8_e4m3, got 'q5_1'
// UNKNOWN-V: error: cache-dtype-v must be one of f32, f16, bf16, q8_0, q4_0, f8_e4m3, got 'int8'
tfm.param @out : tensor<40x256xf32> storage <f32>
func.func @forward(%tokens: tensor<?xi32>, %positions: tensor<?xi32>) -> tensor<?x40xf32> {
  %x = "test.source"(%tokens) : (tensor<?xi32>) -> tensor<?x4x64xf32>
  %k = "test.source"(%tokens) : (tensor<?xi32>) -> tensor<?x2x64xf32>
  %a = tfm.attention %x, %k, %k {causal, scale = 0.5 : f32} : (tensor<?x4x64xf32>, tensor<?x2x64xf32>, tensor<?x2x64xf32>) -> tensor<?x4x64xf32>
  %h = tfm.reshape %a : (tensor<?x4x64xf32>) -> tensor<?x256xf32>
  %o = tfm.weight @out : tensor<40x256xf32>
  %logits = tfm.linear %h, %o : (tensor<?x256xf32>, tensor<40x256xf32>) -> tensor<?x40xf32>
  return %logits : tensor<?x40xf32>
}
