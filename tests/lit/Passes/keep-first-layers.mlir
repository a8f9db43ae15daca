// RUN: kvjit-opt %s --keep-first-layers="layers=2" --split-input-file --verify-diagnostics | FileCheck %s
// RUN: kvjit-opt %s --keep-first-layers="layers=2" --insert-kv-cache --split-input-file --verify-diagnostics | FileCheck %s --check-prefix=CACHE
// RUN: not kvjit-opt %s --keep-first-layers="layers=0" --split-input-file 2>&1 | FileCheck %s --check-prefix=ZERO

// Of three layers, the third is cut away: the final norm reads the second
// layer's output, and the third layer's ops and params, its concatenation of
// Q, K and V among them, are erased. The two attentions left become layers 0
// and 1 of a cache with the model's heads and head size.
// ZERO: error: keep-first-layers{layers=0} keeps no layer of @forward's 3
// CHECK: tfm.param @token_embd.weight
// CHECK: tfm.param @blk.1.ffn_down.weight
// CHECK-NEXT: tfm.param @output_norm.weight
// CHECK-NEXT: tfm.param @output.weight
// CHECK-LABEL: func.func @forward
// CHECK-COUNT-2: tfm.attention
// CHECK-NOT: tfm.attention
// CHECK: tfm.weight @blk.1.ffn_down.weight
// CHECK-NEXT: %[[DOWN:.*]] = tfm.linear
// CHECK-NEXT: %[[X2:.*]] = tfm.add %{{.*}}, %[[DOWN]] : tensor<?x8xf32>
// CHECK-NEXT: %[[NORM:.*]] = tfm.weight @output_norm.weight
// CHECK-NEXT: %[[NORMED:.*]] = tfm.rms_norm %[[X2]], %[[NORM]]
// CHECK-NEXT: %[[OUT:.*]] = tfm.weight @output.weight
// CHECK-NEXT: %[[LOGITS:.*]] = tfm.linear %[[NORMED]], %[[OUT]]
// CHECK-NEXT: return %[[LOGITS]]
// CACHE-LABEL: func.func @step(
// CACHE-SAME: !kv.cache<layers = 2, kv_heads = 1, head_dim = 4, block_size = 16, key_type = f32, value_type = f32>
// CACHE: kv.write %{{.*}}, %{{.*}} into %{{.*}}[0]
// CACHE: kv.write %{{.*}}, %{{.*}} into %{{.*}}[1]
// CACHE-NOT: kv.write

tfm.param @token_embd.weight : tensor<32x8xf32> storage <f32>
tfm.param @blk.0.attn_norm.weight : tensor<8xf32> storage <f32>
tfm.param @blk.0.attn_q.weight : tensor<8x8xf32> storage <f16>
tfm.param @blk.0.attn_k.weight : tensor<4x8xf32> storage <f16>
tfm.param @blk.0.attn_v.weight : tensor<4x8xf32> storage <f16>
tfm.param @"blk.0.attn_q.weight+attn_k.weight+attn_v.weight" : tensor<16x8xf32> storage <f16> concat [@blk.0.attn_q.weight, @blk.0.attn_k.weight, @blk.0.attn_v.weight]
tfm.param @blk.0.attn_output.weight : tensor<8x8xf32> storage <f32>
tfm.param @blk.0.ffn_down.weight : tensor<8x8xf32> storage <f32>
tfm.param @blk.1.attn_norm.weight : tensor<8xf32> storage <f32>
tfm.param @blk.1.attn_q.weight : tensor<8x8xf32> storage <f16>
tfm.param @blk.1.attn_k.weight : tensor<4x8xf32> storage <f16>
tfm.param @blk.1.attn_v.weight : tensor<4x8xf32> storage <f16>
tfm.param @"blk.1.attn_q.weight+attn_k.weight+attn_v.weight" : tensor<16x8xf32> storage <f16> concat [@blk.1.attn_q.weight, @blk.1.attn_k.weight, @blk.1.attn_v.weight]
tfm.param @blk.1.attn_output.weight : tensor<8x8xf32> storage <f32>
tfm.param @blk.1.ffn_down.weight : tensor<8x8xf32> storage <f32>
tfm.param @blk.2.attn_norm.weight : tensor<8xf32> storage <f32>
tfm.param @blk.2.attn_q.weight : tensor<8x8xf32> storage <f16>
tfm.param @blk.2.attn_k.weight : tensor<4x8xf32> storage <f16>
tfm.param @blk.2.attn_v.weight : tensor<4x8xf32> storage <f16>
tfm.param @"blk.2.attn_q.weight+attn_k.weight+attn_v.weight" : tensor<16x8xf32> storage <f16> concat [@blk.2.attn_q.weight, @blk.2.attn_k.weight, @blk.2.attn_v.weight]
tfm.param @blk.2.attn_output.weight : tensor<8x8xf32> storage <f32>
tfm.param @blk.2.ffn_down.weight : tensor<8x8xf32> storage <f32>
tfm.param @output_norm.weight : tensor<8xf32> storage <f32>
tfm.param @output.weight : tensor<32x8xf32> storage <f32>
func.func @forward(%tokens: tensor<?xi32>, %positions: tensor<?xi32>) -> tensor<?x32xf32> {
  %table = tfm.weight @token_embd.weight : tensor<32x8xf32>
  %x0 = tfm.embedding %table, %tokens : (tensor<32x8xf32>, tensor<?xi32>) -> tensor<?x8xf32>
  // Layer 0.
  %norm0 = tfm.weight @blk.0.attn_norm.weight : tensor<8xf32>
  %h0 = tfm.rms_norm %x0, %norm0 {epsilon = 1.0e-05 : f32} : tensor<?x8xf32>, tensor<8xf32>
  %wqkv0 = tfm.weight @"blk.0.attn_q.weight+attn_k.weight+attn_v.weight" : tensor<16x8xf32>
  %qkv0 = tfm.linear %h0, %wqkv0 : (tensor<?x8xf32>, tensor<16x8xf32>) -> tensor<?x16xf32>
  %q0 = tfm.slice_columns %qkv0 {offset = 0 : i64, size = 8 : i64} : (tensor<?x16xf32>) -> tensor<?x8xf32>
  %k0 = tfm.slice_columns %qkv0 {offset = 8 : i64, size = 4 : i64} : (tensor<?x16xf32>) -> tensor<?x4xf32>
  %v0 = tfm.slice_columns %qkv0 {offset = 12 : i64, size = 4 : i64} : (tensor<?x16xf32>) -> tensor<?x4xf32>
  %qh0 = tfm.reshape %q0 : (tensor<?x8xf32>) -> tensor<?x2x4xf32>
  %kh0 = tfm.reshape %k0 : (tensor<?x4xf32>) -> tensor<?x1x4xf32>
  %vh0 = tfm.reshape %v0 : (tensor<?x4xf32>) -> tensor<?x1x4xf32>
  %att0 = tfm.attention %qh0, %kh0, %vh0 {causal, scale = 5.000000e-01 : f32} : (tensor<?x2x4xf32>, tensor<?x1x4xf32>, tensor<?x1x4xf32>) -> tensor<?x2x4xf32>
  %flat0 = tfm.reshape %att0 : (tensor<?x2x4xf32>) -> tensor<?x8xf32>
  %wo0 = tfm.weight @blk.0.attn_output.weight : tensor<8x8xf32>
  %o0 = tfm.linear %flat0, %wo0 : (tensor<?x8xf32>, tensor<8x8xf32>) -> tensor<?x8xf32>
  %r0 = tfm.add %x0, %o0 : tensor<?x8xf32>
  %wdown0 = tfm.weight @blk.0.ffn_down.weight : tensor<8x8xf32>
  %down0 = tfm.linear %r0, %wdown0 : (tensor<?x8xf32>, tensor<8x8xf32>) -> tensor<?x8xf32>
  %x1 = tfm.add %r0, %down0 : tensor<?x8xf32>
  // Layer 1.
  %norm1 = tfm.weight @blk.1.attn_norm.weight : tensor<8xf32>
  %h1 = tfm.rms_norm %x1, %norm1 {epsilon = 1.0e-05 : f32} : tensor<?x8xf32>, tensor<8xf32>
  %wqkv1 = tfm.weight @"blk.1.attn_q.weight+attn_k.weight+attn_v.weight" : tensor<16x8xf32>
  %qkv1 = tfm.linear %h1, %wqkv1 : (tensor<?x8xf32>, tensor<16x8xf32>) -> tensor<?x16xf32>
  %q1 = tfm.slice_columns %qkv1 {offset = 0 : i64, size = 8 : i64} : (tensor<?x16xf32>) -> tensor<?x8xf32>
  %k1 = tfm.slice_columns %qkv1 {offset = 8 : i64, size = 4 : i64} : (tensor<?x16xf32>) -> tensor<?x4xf32>
  %v1 = tfm.slice_columns %qkv1 {offset = 12 : i64, size = 4 : i64} : (tensor<?x16xf32>) -> tensor<?x4xf32>
  %qh1 = tfm.reshape %q1 : (tensor<?x8xf32>) -> tensor<?x2x4xf32>
  %kh1 = tfm.reshape %k1 : (tensor<?x4xf32>) -> tensor<?x1x4xf32>
  %vh1 = tfm.reshape %v1 : (tensor<?x4xf32>) -> tensor<?x1x4xf32>
  %att1 = tfm.attention %qh1, %kh1, %vh1 {causal, scale = 5.000000e-01 : f32} : (tensor<?x2x4xf32>, tensor<?x1x4xf32>, tensor<?x1x4xf32>) -> tensor<?x2x4xf32>
  %flat1 = tfm.reshape %att1 : (tensor<?x2x4xf32>) -> tensor<?x8xf32>
  %wo1 = tfm.weight @blk.1.attn_output.weight : tensor<8x8xf32>
  %o1 = tfm.linear %flat1, %wo1 : (tensor<?x8xf32>, tensor<8x8xf32>) -> tensor<?x8xf32>
  %r1 = tfm.add %x1, %o1 : tensor<?x8xf32>
  %wdown1 = tfm.weight @blk.1.ffn_down.weight : tensor<8x8xf32>
  %down1 = tfm.linear %r1, %wdown1 : (tensor<?x8xf32>, tensor<8x8xf32>) -> tensor<?x8xf32>
  %x2 = tfm.add %r1, %down1 : tensor<?x8xf32>
  // Layer 2.
  %norm2 = tfm.weight @blk.2.attn_norm.weight : tensor<8xf32>
  %h2 = tfm.rms_norm %x2, %norm2 {epsilon = 1.0e-05 : f32} : tensor<?x8xf32>, tensor<8xf32>
  %wqkv2 = tfm.weight @"blk.2.attn_q.weight+attn_k.weight+attn_v.weight" : tensor<16x8xf32>
  %qkv2 = tfm.linear %h2, %wqkv2 : (tensor<?x8xf32>, tensor<16x8xf32>) -> tensor<?x16xf32>
  %q2 = tfm.slice_columns %qkv2 {offset = 0 : i64, size = 8 : i64} : (tensor<?x16xf32>) -> tensor<?x8xf32>
  %k2 = tfm.slice_columns %qkv2 {offset = 8 : i64, size = 4 : i64} : (tensor<?x16xf32>) -> tensor<?x4xf32>
  %v2 = tfm.slice_columns %qkv2 {offset = 12 : i64, size = 4 : i64} : (tensor<?x16xf32>) -> tensor<?x4xf32>
  %qh2 = tfm.reshape %q2 : (tensor<?x8xf32>) -> tensor<?x2x4xf32>
  %kh2 = tfm.reshape %k2 : (tensor<?x4xf32>) -> tensor<?x1x4xf32>
  %vh2 = tfm.reshape %v2 : (tensor<?x4xf32>) -> tensor<?x1x4xf32>
  %att2 = tfm.attention %qh2, %kh2, %vh2 {causal, scale = 5.000000e-01 : f32} : (tensor<?x2x4xf32>, tensor<?x1x4xf32>, tensor<?x1x4xf32>) -> tensor<?x2x4xf32>
  %flat2 = tfm.reshape %att2 : (tensor<?x2x4xf32>) -> tensor<?x8xf32>
  %wo2 = tfm.weight @blk.2.attn_output.weight : tensor<8x8xf32>
  %o2 = tfm.linear %flat2, %wo2 : (tensor<?x8xf32>, tensor<8x8xf32>) -> tensor<?x8xf32>
  %r2 = tfm.add %x2, %o2 : tensor<?x8xf32>
  %wdown2 = tfm.weight @blk.2.ffn_down.weight : tensor<8x8xf32>
  %down2 = tfm.linear %r2, %wdown2 : (tensor<?x8xf32>, tensor<8x8xf32>) -> tensor<?x8xf32>
  %x3 = tfm.add %r2, %down2 : tensor<?x8xf32>
  %final_norm = tfm.weight @output_norm.weight : tensor<8xf32>
  %normed = tfm.rms_norm %x3, %final_norm {epsilon = 1.0e-05 : f32} : tensor<?x8xf32>, tensor<8xf32>
  %output = tfm.weight @output.weight : tensor<32x8xf32>
  %logits = tfm.linear %normed, %output : (tensor<?x8xf32>, tensor<32x8xf32>) -> tensor<?x32xf32>
  return %logits : tensor<?x32xf32>
}

// -----

// Two layers of two, a bound exactly at the limit: nothing changes.
// ZERO: error: keep-first-layers{layers=0} keeps no layer of @forward's 2
// CHECK: tfm.param @blk.0.ffn_down.weight
// CHECK: tfm.param @blk.1.ffn_down.weight
// CHECK-LABEL: func.func @forward
// CHECK-COUNT-2: tfm.attention
// CHECK: tfm.weight @blk.1.ffn_down.weight
// CHECK-NEXT: %[[DOWN:.*]] = tfm.linear
// CHECK-NEXT: %[[X2:.*]] = tfm.add %{{.*}}, %[[DOWN]] : tensor<?x8xf32>
// CHECK-NEXT: %[[NORM:.*]] = tfm.weight @output_norm.weight
// CHECK-NEXT: tfm.rms_norm %[[X2]], %[[NORM]]
// CACHE-LABEL: func.func @step(
// CACHE-SAME: !kv.cache<layers = 2,

tfm.param @token_embd.weight : tensor<32x8xf32> storage <f32>
tfm.param @blk.0.attn_norm.weight : tensor<8xf32> storage <f32>
tfm.param @blk.0.attn_q.weight : tensor<8x8xf32> storage <f16>
tfm.param @blk.0.attn_k.weight : tensor<4x8xf32> storage <f16>
tfm.param @blk.0.attn_v.weight : tensor<4x8xf32> storage <f16>
tfm.param @"blk.0.attn_q.weight+attn_k.weight+attn_v.weight" : tensor<16x8xf32> storage <f16> concat [@blk.0.attn_q.weight, @blk.0.attn_k.weight, @blk.0.attn_v.weight]
tfm.param @blk.0.attn_output.weight : tensor<8x8xf32> storage <f32>
tfm.param @blk.0.ffn_down.weight : tensor<8x8xf32> storage <f32>
tfm.param @blk.1.attn_norm.weight : tensor<8xf32> storage <f32>
tfm.param @blk.1.attn_q.weight : tensor<8x8xf32> storage <f16>
tfm.param @blk.1.attn_k.weight : tensor<4x8xf32> storage <f16>
tfm.param @blk.1.attn_v.weight : tensor<4x8xf32> storage <f16>
tfm.param @"blk.1.attn_q.weight+attn_k.weight+attn_v.weight" : tensor<16x8xf32> storage <f16> concat [@blk.1.attn_q.weight, @blk.1.attn_k.weight, @blk.1.attn_v.weight]
tfm.param @blk.1.attn_output.weight : tensor<8x8xf32> storage <f32>
tfm.param @blk.1.ffn_down.weight : tensor<8x8xf32> storage <f32>
tfm.param @output_norm.weight : tensor<8xf32> storage <f32>
tfm.param @output.weight : tensor<32x8xf32> storage <f32>
func.func @forward(%tokens: tensor<?xi32>, %positions: tensor<?xi32>) -> tensor<?x32xf32> {
  %table = tfm.weight @token_embd.weight : tensor<32x8xf32>
  %x0 = tfm.embedding %table, %tokens : (tensor<32x8xf32>, tensor<?xi32>) -> tensor<?x8xf32>
  // Layer 0.
  %norm0 = tfm.weight @blk.0.attn_norm.weight : tensor<8xf32>
  %h0 = tfm.rms_norm %x0, %norm0 {epsilon = 1.0e-05 : f32} : tensor<?x8xf32>, tensor<8xf32>
  %wqkv0 = tfm.weight @"blk.0.attn_q.weight+attn_k.weight+attn_v.weight" : tensor<16x8xf32>
  %qkv0 = tfm.linear %h0, %wqkv0 : (tensor<?x8xf32>, tensor<16x8xf32>) -> tensor<?x16xf32>
  %q0 = tfm.slice_columns %qkv0 {offset = 0 : i64, size = 8 : i64} : (tensor<?x16xf32>) -> tensor<?x8xf32>
  %k0 = tfm.slice_columns %qkv0 {offset = 8 : i64, size = 4 : i64} : (tensor<?x16xf32>) -> tensor<?x4xf32>
  %v0 = tfm.slice_columns %qkv0 {offset = 12 : i64, size = 4 : i64} : (tensor<?x16xf32>) -> tensor<?x4xf32>
  %qh0 = tfm.reshape %q0 : (tensor<?x8xf32>) -> tensor<?x2x4xf32>
  %kh0 = tfm.reshape %k0 : (tensor<?x4xf32>) -> tensor<?x1x4xf32>
  %vh0 = tfm.reshape %v0 : (tensor<?x4xf32>) -> tensor<?x1x4xf32>
  %att0 = tfm.attention %qh0, %kh0, %vh0 {causal, scale = 5.000000e-01 : f32} : (tensor<?x2x4xf32>, tensor<?x1x4xf32>, tensor<?x1x4xf32>) -> tensor<?x2x4xf32>
  %flat0 = tfm.reshape %att0 : (tensor<?x2x4xf32>) -> tensor<?x8xf32>
  %wo0 = tfm.weight @blk.0.attn_output.weight : tensor<8x8xf32>
  %o0 = tfm.linear %flat0, %wo0 : (tensor<?x8xf32>, tensor<8x8xf32>) -> tensor<?x8xf32>
  %r0 = tfm.add %x0, %o0 : tensor<?x8xf32>
  %wdown0 = tfm.weight @blk.0.ffn_down.weight : tensor<8x8xf32>
  %down0 = tfm.linear %r0, %wdown0 : (tensor<?x8xf32>, tensor<8x8xf32>) -> tensor<?x8xf32>
  %x1 = tfm.add %r0, %down0 : tensor<?x8xf32>
  // Layer 1.
  %norm1 = tfm.weight @blk.1.attn_norm.weight : tensor<8xf32>
  %h1 = tfm.rms_norm %x1, %norm1 {epsilon = 1.0e-05 : f32} : tensor<?x8xf32>, tensor<8xf32>
  %wqkv1 = tfm.weight @"blk.1.attn_q.weight+attn_k.weight+attn_v.weight" : tensor<16x8xf32>
  %qkv1 = tfm.linear %h1, %wqkv1 : (tensor<?x8xf32>, tensor<16x8xf32>) -> tensor<?x16xf32>
  %q1 = tfm.slice_columns %qkv1 {offset = 0 : i64, size = 8 : i64} : (tensor<?x16xf32>) -> tensor<?x8xf32>
  %k1 = tfm.slice_columns %qkv1 {offset = 8 : i64, size = 4 : i64} : (tensor<?x16xf32>) -> tensor<?x4xf32>
  %v1 = tfm.slice_columns %qkv1 {offset = 12 : i64, size = 4 : i64} : (tensor<?x16xf32>) -> tensor<?x4xf32>
  %qh1 = tfm.reshape %q1 : (tensor<?x8xf32>) -> tensor<?x2x4xf32>
  %kh1 = tfm.reshape %k1 : (tensor<?x4xf32>) -> tensor<?x1x4xf32>
  %vh1 = tfm.reshape %v1 : (tensor<?x4xf32>) -> tensor<?x1x4xf32>
  %att1 = tfm.attention %qh1, %kh1, %vh1 {causal, scale = 5.000000e-01 : f32} : (tensor<?x2x4xf32>, tensor<?x1x4xf32>, tensor<?x1x4xf32>) -> tensor<?x2x4xf32>
  %flat1 = tfm.reshape %att1 : (tensor<?x2x4xf32>) -> tensor<?x8xf32>
  %wo1 = tfm.weight @blk.1.attn_output.weight : tensor<8x8xf32>
  %o1 = tfm.linear %flat1, %wo1 : (tensor<?x8xf32>, tensor<8x8xf32>) -> tensor<?x8xf32>
  %r1 = tfm.add %x1, %o1 : tensor<?x8xf32>
  %wdown1 = tfm.weight @blk.1.ffn_down.weight : tensor<8x8xf32>
  %down1 = tfm.linear %r1, %wdown1 : (tensor<?x8xf32>, tensor<8x8xf32>) -> tensor<?x8xf32>
  %x2 = tfm.add %r1, %down1 : tensor<?x8xf32>
  %final_norm = tfm.weight @output_norm.weight : tensor<8xf32>
  %normed = tfm.rms_norm %x2, %final_norm {epsilon = 1.0e-05 : f32} : tensor<?x8xf32>, tensor<8xf32>
  %output = tfm.weight @output.weight : tensor<32x8xf32>
  %logits = tfm.linear %normed, %output : (tensor<?x8xf32>, tensor<32x8xf32>) -> tensor<?x32xf32>
  return %logits : tensor<?x32xf32>
}

// -----

// Two layers of one, a bound one past the limit, is an error naming both.
// ZERO: error: keep-first-layers{layers=0} keeps no layer of @forward's 1
tfm.param @token_embd.weight : tensor<32x8xf32> storage <f32>
tfm.param @blk.0.attn_norm.weight : tensor<8xf32> storage <f32>
tfm.param @blk.0.attn_q.weight : tensor<8x8xf32> storage <f16>
tfm.param @blk.0.attn_k.weight : tensor<4x8xf32> storage <f16>
tfm.param @blk.0.attn_v.weight : tensor<4x8xf32> storage <f16>
tfm.param @"blk.0.attn_q.weight+attn_k.weight+attn_v.weight" : tensor<16x8xf32> storage <f16> concat [@blk.0.attn_q.weight, @blk.0.attn_k.weight, @blk.0.attn_v.weight]
tfm.param @blk.0.attn_output.weight : tensor<8x8xf32> storage <f32>
tfm.param @blk.0.ffn_down.weight : tensor<8x8xf32> storage <f32>
tfm.param @output_norm.weight : tensor<8xf32> storage <f32>
tfm.param @output.weight : tensor<32x8xf32> storage <f32>
// expected-error @below {{keep-first-layers{layers=2} keeps more layers than @forward's 1}}
func.func @forward(%tokens: tensor<?xi32>, %positions: tensor<?xi32>) -> tensor<?x32xf32> {
  %table = tfm.weight @token_embd.weight : tensor<32x8xf32>
  %x0 = tfm.embedding %table, %tokens : (tensor<32x8xf32>, tensor<?xi32>) -> tensor<?x8xf32>
  // Layer 0.
  %norm0 = tfm.weight @blk.0.attn_norm.weight : tensor<8xf32>
  %h0 = tfm.rms_norm %x0, %norm0 {epsilon = 1.0e-05 : f32} : tensor<?x8xf32>, tensor<8xf32>
  %wqkv0 = tfm.weight @"blk.0.attn_q.weight+attn_k.weight+attn_v.weight" : tensor<16x8xf32>
  %qkv0 = tfm.linear %h0, %wqkv0 : (tensor<?x8xf32>, tensor<16x8xf32>) -> tensor<?x16xf32>
  %q0 = tfm.slice_columns %qkv0 {offset = 0 : i64, size = 8 : i64} : (tensor<?x16xf32>) -> tensor<?x8xf32>
  %k0 = tfm.slice_columns %qkv0 {offset = 8 : i64, size = 4 : i64} : (tensor<?x16xf32>) -> tensor<?x4xf32>
  %v0 = tfm.slice_columns %qkv0 {offset = 12 : i64, size = 4 : i64} : (tensor<?x16xf32>) -> tensor<?x4xf32>
  %qh0 = tfm.reshape %q0 : (tensor<?x8xf32>) -> tensor<?x2x4xf32>
  %kh0 = tfm.reshape %k0 : (tensor<?x4xf32>) -> tensor<?x1x4xf32>
  %vh0 = tfm.reshape %v0 : (tensor<?x4xf32>) -> tensor<?x1x4xf32>
  %att0 = tfm.attention %qh0, %kh0, %vh0 {causal, scale = 5.000000e-01 : f32} : (tensor<?x2x4xf32>, tensor<?x1x4xf32>, tensor<?x1x4xf32>) -> tensor<?x2x4xf32>
  %flat0 = tfm.reshape %att0 : (tensor<?x2x4xf32>) -> tensor<?x8xf32>
  %wo0 = tfm.weight @blk.0.attn_output.weight : tensor<8x8xf32>
  %o0 = tfm.linear %flat0, %wo0 : (tensor<?x8xf32>, tensor<8x8xf32>) -> tensor<?x8xf32>
  %r0 = tfm.add %x0, %o0 : tensor<?x8xf32>
  %wdown0 = tfm.weight @blk.0.ffn_down.weight : tensor<8x8xf32>
  %down0 = tfm.linear %r0, %wdown0 : (tensor<?x8xf32>, tensor<8x8xf32>) -> tensor<?x8xf32>
  %x1 = tfm.add %r0, %down0 : tensor<?x8xf32>
  %final_norm = tfm.weight @output_norm.weight : tensor<8xf32>
  %normed = tfm.rms_norm %x1, %final_norm {epsilon = 1.0e-05 : f32} : tensor<?x8xf32>, tensor<8xf32>
  %output = tfm.weight @output.weight : tensor<32x8xf32>
  %logits = tfm.linear %normed, %output : (tensor<?x8xf32>, tensor<32x8xf32>) -> tensor<?x32xf32>
  return %logits : tensor<?x32xf32>
}

// -----

// A function whose weights are named by no layer has none to keep.
// ZERO: error: keep-first-layers finds no layers in @no_layers
tfm.param @out : tensor<32x8xf32> storage <f32>
// expected-error @below {{keep-first-layers finds no layers in @no_layers: no tfm.weight reads a param named blk.<i>.}}
func.func @no_layers(%x: tensor<?x8xf32>) -> tensor<?x32xf32> {
  %w = tfm.weight @out : tensor<32x8xf32>
  %logits = tfm.linear %x, %w : (tensor<?x8xf32>, tensor<32x8xf32>) -> tensor<?x32xf32>
  return %logits : tensor<?x32xf32>
}

// -----

// After insert-kv-cache the cache holds every layer: too late to cut.
// ZERO: error: keep-first-layers runs before insert-kv-cache: @step reads a KV cache already
tfm.param @blk.0.attn_output.weight : tensor<8x8xf32> storage <f32>
// expected-error @below {{keep-first-layers runs before insert-kv-cache: @step reads a KV cache already, which holds every layer}}
func.func @step(%x: tensor<?x8xf32>, %cache: !kv.cache<layers = 1, kv_heads = 1, head_dim = 4, block_size = 16, key_type = f32, value_type = f32>) -> tensor<?x8xf32> {
  %w = tfm.weight @blk.0.attn_output.weight : tensor<8x8xf32>
  %y = tfm.linear %x, %w : (tensor<?x8xf32>, tensor<8x8xf32>) -> tensor<?x8xf32>
  return %y : tensor<?x8xf32>
}
