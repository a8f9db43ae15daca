// RUN: kvjit-opt %s --insert-kv-cache="block-size=16 cache-dtype=f16" --split-input-file --verify-diagnostics --allow-unregistered-dialect | FileCheck %s

tfm.param @norm : tensor<16xf32> storage <f32>
tfm.param @out : tensor<40x16xf32> storage <f32>

// CHECK-LABEL: func.func @step(
// CHECK-SAME: %[[TOKENS:[^:]*]]: tensor<?xi32>, %[[POS:[^:]*]]: tensor<?xi32>, %[[STARTS:[^:]*]]: tensor<?xi32>, %[[LENS:[^:]*]]: tensor<?xi32>, %[[SLOTS:[^:]*]]: tensor<?xi32>, %[[TABLES:[^:]*]]: tensor<?x?xi32>, %[[ROWS:[^:]*]]: tensor<?xi32>,
// CHECK-SAME: %[[CACHE:[^:]*]]: !kv.cache<layers = 2, kv_heads = 2, head_dim = 4, block_size = 16, key_type = f16, value_type = f16>) -> tensor<?x40xf32>
// CHECK-SAME: attributes {kv.step_function}
func.func @forward(%tokens: tensor<?xi32>, %positions: tensor<?xi32>) -> tensor<?x40xf32> {
  %x = "test.source"(%tokens) : (tensor<?xi32>) -> tensor<?x4x4xf32>
  %k = "test.source"(%tokens) : (tensor<?xi32>) -> tensor<?x2x4xf32>
  // CHECK: kv.write %{{.*}}, %{{.*}} into %[[CACHE]][0] at %[[SLOTS]]
  // CHECK: %[[A0:.*]] = kv.attention %{{.*}}, %[[CACHE]][0] positions %[[POS]] seq_starts %[[STARTS]] context_lens %[[LENS]] block_tables %[[TABLES]] {scale = 5.000000e-01 : f32}
  %a0 = tfm.attention %x, %k, %k {causal, scale = 0.5 : f32} : (tensor<?x4x4xf32>, tensor<?x2x4xf32>, tensor<?x2x4xf32>) -> tensor<?x4x4xf32>
  // CHECK: kv.write %{{.*}}, %{{.*}} into %[[CACHE]][1] at %[[SLOTS]]
  // CHECK: kv.attention %[[A0]], %[[CACHE]][1]
  %a1 = tfm.attention %a0, %k, %k {causal, scale = 0.5 : f32} : (tensor<?x4x4xf32>, tensor<?x2x4xf32>, tensor<?x2x4xf32>) -> tensor<?x4x4xf32>
  // CHECK-NOT: tfm.attention
  %h = tfm.reshape %a1 : (tensor<?x4x4xf32>) -> tensor<?x16xf32>
  // CHECK: %[[PICKED:.*]] = tfm.gather_rows %{{.*}}, %[[ROWS]] : (tensor<?x16xf32>, tensor<?xi32>) -> tensor<?x16xf32>
  // CHECK: tfm.rms_norm %[[PICKED]]
  %w = tfm.weight @norm : tensor<16xf32>
  %n = tfm.rms_norm %h, %w {epsilon = 1.0e-5 : f32} : tensor<?x16xf32>, tensor<16xf32>
  %o = tfm.weight @out : tensor<40x16xf32>
  %logits = tfm.linear %n, %o : (tensor<?x16xf32>, tensor<40x16xf32>) -> tensor<?x40xf32>
  return %logits : tensor<?x40xf32>
}

// -----

// Sliding windows and soft caps stay with their layers: layer 0 attends
// over a window of 8 positions with its scores capped at 50, layer 1 over
// the whole context uncapped.
tfm.param @out : tensor<40x16xf32> storage <f32>

// CHECK-LABEL: func.func @step(
// CHECK: kv.attention %{{.*}}, %{{.*}}[0] positions {{.*}} {scale = 5.000000e-01 : f32, softcap = 5.000000e+01 : f32, window = 8 : i64}
// CHECK: kv.attention %{{.*}}, %{{.*}}[1] positions {{.*}} {scale = 5.000000e-01 : f32} :
func.func @forward(%tokens: tensor<?xi32>, %positions: tensor<?xi32>) -> tensor<?x40xf32> {
  %x = "test.source"(%tokens) : (tensor<?xi32>) -> tensor<?x4x4xf32>
  %k = "test.source"(%tokens) : (tensor<?xi32>) -> tensor<?x2x4xf32>
  %a0 = tfm.attention %x, %k, %k {causal, scale = 0.5 : f32, softcap = 50.0 : f32, window = 8 : i64} : (tensor<?x4x4xf32>, tensor<?x2x4xf32>, tensor<?x2x4xf32>) -> tensor<?x4x4xf32>
  %a1 = tfm.attention %a0, %k, %k {causal, scale = 0.5 : f32} : (tensor<?x4x4xf32>, tensor<?x2x4xf32>, tensor<?x2x4xf32>) -> tensor<?x4x4xf32>
  %h = tfm.reshape %a1 : (tensor<?x4x4xf32>) -> tensor<?x16xf32>
  %o = tfm.weight @out : tensor<40x16xf32>
  %logits = tfm.linear %h, %o : (tensor<?x16xf32>, tensor<40x16xf32>) -> tensor<?x40xf32>
  return %logits : tensor<?x40xf32>
}

// -----

// The gather moves up through every op of class CommutesWithRowGather (a
// linear, the norms, the unary elementwise ops) and stops below an add,
// whose second operand has rows of its own.
tfm.param @norm : tensor<16xf32> storage <f32>
tfm.param @out : tensor<40x16xf32> storage <f32>

// CHECK-LABEL: func.func @step(
// CHECK-SAME: %[[ROWS:[^:]*]]: tensor<?xi32>, %{{[^:]*}}: !kv.cache
// CHECK: %[[SUM:.*]] = tfm.add
// CHECK-NEXT: %[[PICKED:.*]] = tfm.gather_rows %[[SUM]], %[[ROWS]]
// CHECK-NEXT: %[[N:.*]] = tfm.rms_norm %[[PICKED]]
// CHECK-NEXT: %[[L:.*]] = tfm.layer_norm %[[N]]
// CHECK-NEXT: %[[S:.*]] = tfm.scale %[[L]]
// CHECK-NEXT: %[[A:.*]] = tfm.silu %[[S]]
// CHECK-NEXT: %[[G:.*]] = tfm.gelu %[[A]]
// CHECK-NEXT: tfm.linear %[[G]]
func.func @forward(%tokens: tensor<?xi32>, %positions: tensor<?xi32>) -> tensor<?x40xf32> {
  %w = tfm.weight @norm : tensor<16xf32>
  %o = tfm.weight @out : tensor<40x16xf32>
  %x = "test.source"(%tokens) : (tensor<?xi32>) -> tensor<?x4x4xf32>
  %k = "test.source"(%tokens) : (tensor<?xi32>) -> tensor<?x2x4xf32>
  %a = tfm.attention %x, %k, %k {causal, scale = 0.5 : f32} : (tensor<?x4x4xf32>, tensor<?x2x4xf32>, tensor<?x2x4xf32>) -> tensor<?x4x4xf32>
  %h = tfm.reshape %a : (tensor<?x4x4xf32>) -> tensor<?x16xf32>
  %e = "test.source"(%tokens) : (tensor<?xi32>) -> tensor<?x16xf32>
  %sum = tfm.add %h, %e : tensor<?x16xf32>
  %n = tfm.rms_norm %sum, %w {epsilon = 1.0e-5 : f32} : tensor<?x16xf32>, tensor<16xf32>
  %l = tfm.layer_norm %n, %w {epsilon = 1.0e-5 : f32} : tensor<?x16xf32>, tensor<16xf32>
  %s = tfm.scale %l, 2.0 : tensor<?x16xf32>
  %act = tfm.silu %s : tensor<?x16xf32>
  %g = tfm.gelu %act : tensor<?x16xf32>
  %logits = tfm.linear %g, %o : (tensor<?x16xf32>, tensor<40x16xf32>) -> tensor<?x40xf32>
  return %logits : tensor<?x40xf32>
}

// -----

func.func @forward(%tokens: tensor<?xi32>, %positions: tensor<?xi32>) -> tensor<?x4x4xf32> {
  %x = "test.source"(%tokens) : (tensor<?xi32>) -> tensor<?x4x4xf32>
  // expected-error @+1 {{'tfm.attention' op is not causal; a decoder's KV cache needs causal attention}}
  %a = tfm.attention %x, %x, %x {scale = 0.5 : f32} : (tensor<?x4x4xf32>, tensor<?x4x4xf32>, tensor<?x4x4xf32>) -> tensor<?x4x4xf32>
  return %a : tensor<?x4x4xf32>
}

// -----

// expected-error @+1 {{insert-kv-cache expects (tokens: tensor<?xi32>, positions: tensor<?xi32>) -> logits}}
func.func @forward(%tokens: tensor<?xi32>) -> tensor<?x4x4xf32> {
  %x = "test.source"(%tokens) : (tensor<?xi32>) -> tensor<?x4x4xf32>
  %a = tfm.attention %x, %x, %x {causal, scale = 0.5 : f32} : (tensor<?x4x4xf32>, tensor<?x4x4xf32>, tensor<?x4x4xf32>) -> tensor<?x4x4xf32>
  return %a : tensor<?x4x4xf32>
}

// -----

// expected-error @+1 {{insert-kv-cache found no function with tfm.attention; run fuse-attention first}}
module {
  func.func @forward(%tokens: tensor<?xi32>, %positions: tensor<?xi32>) -> tensor<?xi32> {
    return %tokens : tensor<?xi32>
  }
}

// -----

func.func @forward(%tokens: tensor<?xi32>, %positions: tensor<?xi32>) -> tensor<?x4x4xf32> {
  %x = "test.source"(%tokens) : (tensor<?xi32>) -> tensor<?x4x4xf32>
  %a = tfm.attention %x, %x, %x {causal, scale = 0.5 : f32} : (tensor<?x4x4xf32>, tensor<?x4x4xf32>, tensor<?x4x4xf32>) -> tensor<?x4x4xf32>
  // expected-error @+1 {{'func.return' op returns logits that no op commuting with a row gather computes; cannot select logits_rows}}
  return %a : tensor<?x4x4xf32>
}
