// A type stored in blocks of 32 needs whole blocks per head.
// RUN: kvjit-opt %s --insert-kv-cache="cache-dtype=f16 cache-dtype-k=q8_0" --allow-unregistered-dialect --verify-diagnostics

tfm.param @out : tensor<40x16xf32> storage <f32>
// expected-error @+1 {{a cache of q8_0 keys stores each head in blocks of 32 elements; head_dim 4 is not a multiple of 32}}
func.func @forward(%tokens: tensor<?xi32>, %positions: tensor<?xi32>) -> tensor<?x40xf32> {
  %x = "test.source"(%tokens) : (tensor<?xi32>) -> tensor<?x4x4xf32>
  %k = "test.source"(%tokens) : (tensor<?xi32>) -> tensor<?x2x4xf32>
  %a = tfm.attention %x, %k, %k {causal, scale = 0.5 : f32} : (tensor<?x4x4xf32>, tensor<?x2x4xf32>, tensor<?x2x4xf32>) -> tensor<?x4x4xf32>
  %h = tfm.reshape %a : (tensor<?x4x4xf32>) -> tensor<?x16xf32>
  %o = tfm.weight @out : tensor<40x16xf32>
  %logits = tfm.linear %h, %o : (tensor<?x16xf32>, tensor<40x16xf32>) -> tensor<?x40xf32>
  return %logits : tensor<?x40xf32>
}
