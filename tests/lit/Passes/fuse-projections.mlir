// RUN: kvjit-opt %s --fuse-projections --split-input-file | FileCheck %s

// Q, K and V of one normed input (K and V narrower, as under GQA) become one
// linear over a param that concatenates their rows; each projection is its
// columns of the fused result, in the order of the parts.
// CHECK: tfm.param @"blk.0.attn_q.weight+attn_k.weight+attn_v.weight" : tensor<128x64xf32> storage <q8_0> concat [@blk.0.attn_q.weight, @blk.0.attn_k.weight, @blk.0.attn_v.weight]
// CHECK-LABEL: func.func @qkv
// CHECK-SAME: (%[[H:.*]]: tensor<?x64xf32>)
// CHECK-NEXT: %[[W:.*]] = tfm.weight @"blk.0.attn_q.weight+attn_k.weight+attn_v.weight" : tensor<128x64xf32>
// CHECK-NEXT: %[[QKV:.*]] = tfm.linear %[[H]], %[[W]] : (tensor<?x64xf32>, tensor<128x64xf32>) -> tensor<?x128xf32>
// CHECK-NEXT: %[[Q:.*]] = tfm.slice_columns %[[QKV]] {offset = 0 : i64, size = 64 : i64} : (tensor<?x128xf32>) -> tensor<?x64xf32>
// CHECK-NEXT: %[[K:.*]] = tfm.slice_columns %[[QKV]] {offset = 64 : i64, size = 32 : i64} : (tensor<?x128xf32>) -> tensor<?x32xf32>
// CHECK-NEXT: %[[V:.*]] = tfm.slice_columns %[[QKV]] {offset = 96 : i64, size = 32 : i64} : (tensor<?x128xf32>) -> tensor<?x32xf32>
// CHECK-NOT: tfm.linear
// CHECK: return %[[Q]], %[[K]], %[[V]]
tfm.param @blk.0.attn_q.weight : tensor<64x64xf32> storage <q8_0>
tfm.param @blk.0.attn_k.weight : tensor<32x64xf32> storage <q8_0>
tfm.param @blk.0.attn_v.weight : tensor<32x64xf32> storage <q8_0>
func.func @qkv(%h: tensor<?x64xf32>) -> (tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>) {
  %wq = tfm.weight @blk.0.attn_q.weight : tensor<64x64xf32>
  %wk = tfm.weight @blk.0.attn_k.weight : tensor<32x64xf32>
  %wv = tfm.weight @blk.0.attn_v.weight : tensor<32x64xf32>
  %q = tfm.linear %h, %wq : (tensor<?x64xf32>, tensor<64x64xf32>) -> tensor<?x64xf32>
  %k = tfm.linear %h, %wk : (tensor<?x64xf32>, tensor<32x64xf32>) -> tensor<?x32xf32>
  %v = tfm.linear %h, %wv : (tensor<?x64xf32>, tensor<32x64xf32>) -> tensor<?x32xf32>
  return %q, %k, %v : tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>
}

// -----

// Gate and up of a SwiGLU: the fused linear goes where the gate's was, and
// the views feed the silu and the product; down reads another input alone.
// CHECK: tfm.param @"ffn_gate.weight+ffn_up.weight" : tensor<32x32xf32> storage <q4_1> concat [@ffn_gate.weight, @ffn_up.weight]
// CHECK-LABEL: func.func @gate_up
// CHECK: %[[FUSED:.*]] = tfm.linear %{{.*}}, %{{.*}} : (tensor<?x32xf32>, tensor<32x32xf32>) -> tensor<?x32xf32>
// CHECK-NEXT: %[[GATE:.*]] = tfm.slice_columns %[[FUSED]] {offset = 0 : i64, size = 16 : i64}
// CHECK-NEXT: %[[UP:.*]] = tfm.slice_columns %[[FUSED]] {offset = 16 : i64, size = 16 : i64}
// CHECK-NEXT: %[[ACT:.*]] = tfm.silu %[[GATE]]
// CHECK-NEXT: %{{.*}} = tfm.mul %[[ACT]], %[[UP]]
// CHECK: tfm.weight @ffn_down.weight
// CHECK-NEXT: tfm.linear
tfm.param @ffn_gate.weight : tensor<16x32xf32> storage <q4_1>
tfm.param @ffn_up.weight : tensor<16x32xf32> storage <q4_1>
tfm.param @ffn_down.weight : tensor<32x16xf32> storage <f32>
func.func @gate_up(%h: tensor<?x32xf32>) -> tensor<?x32xf32> {
  %wg = tfm.weight @ffn_gate.weight : tensor<16x32xf32>
  %gate = tfm.linear %h, %wg : (tensor<?x32xf32>, tensor<16x32xf32>) -> tensor<?x16xf32>
  %act = tfm.silu %gate : tensor<?x16xf32>
  %wu = tfm.weight @ffn_up.weight : tensor<16x32xf32>
  %up = tfm.linear %h, %wu : (tensor<?x32xf32>, tensor<16x32xf32>) -> tensor<?x16xf32>
  %gated = tfm.mul %act, %up : tensor<?x16xf32>
  %wd = tfm.weight @ffn_down.weight : tensor<32x16xf32>
  %down = tfm.linear %gated, %wd : (tensor<?x16xf32>, tensor<32x16xf32>) -> tensor<?x32xf32>
  return %down : tensor<?x32xf32>
}

// -----

// Of three linears of one input, the two of one storage type fuse; the Q6_K
// one stays as it is.
// CHECK: tfm.param @"attn_q+attn_k" : tensor<512x256xf32> storage <q4_1> concat [@attn_q, @attn_k]
// CHECK-LABEL: func.func @mixed_storage
// CHECK: %[[WV:.*]] = tfm.weight @attn_v
// CHECK: tfm.linear %{{.*}}, %{{.*}} : (tensor<?x256xf32>, tensor<512x256xf32>)
// CHECK: tfm.linear %{{.*}}, %[[WV]] : (tensor<?x256xf32>, tensor<256x256xf32>)
tfm.param @attn_q : tensor<256x256xf32> storage <q4_1>
tfm.param @attn_k : tensor<256x256xf32> storage <q4_1>
tfm.param @attn_v : tensor<256x256xf32> storage <q6_k>
func.func @mixed_storage(%h: tensor<?x256xf32>) -> (tensor<?x256xf32>, tensor<?x256xf32>, tensor<?x256xf32>) {
  %wq = tfm.weight @attn_q : tensor<256x256xf32>
  %wk = tfm.weight @attn_k : tensor<256x256xf32>
  %wv = tfm.weight @attn_v : tensor<256x256xf32>
  %q = tfm.linear %h, %wq : (tensor<?x256xf32>, tensor<256x256xf32>) -> tensor<?x256xf32>
  %k = tfm.linear %h, %wk : (tensor<?x256xf32>, tensor<256x256xf32>) -> tensor<?x256xf32>
  %v = tfm.linear %h, %wv : (tensor<?x256xf32>, tensor<256x256xf32>) -> tensor<?x256xf32>
  return %q, %k, %v : tensor<?x256xf32>, tensor<?x256xf32>, tensor<?x256xf32>
}

// -----

// Must not match: two storage types alone (Q4_1 and Q6_K), each a lone linear.
// CHECK-LABEL: func.func @different_storage
// CHECK-NOT: concat
// CHECK-NOT: slice_columns
// CHECK: tfm.linear
// CHECK: tfm.linear
tfm.param @wa : tensor<256x256xf32> storage <q4_1>
tfm.param @wb : tensor<256x256xf32> storage <q6_k>
func.func @different_storage(%h: tensor<?x256xf32>) -> (tensor<?x256xf32>, tensor<?x256xf32>) {
  %a_w = tfm.weight @wa : tensor<256x256xf32>
  %b_w = tfm.weight @wb : tensor<256x256xf32>
  %a = tfm.linear %h, %a_w : (tensor<?x256xf32>, tensor<256x256xf32>) -> tensor<?x256xf32>
  %b = tfm.linear %h, %b_w : (tensor<?x256xf32>, tensor<256x256xf32>) -> tensor<?x256xf32>
  return %a, %b : tensor<?x256xf32>, tensor<?x256xf32>
}

// -----

// Must not match: linears of different inputs.
// CHECK-LABEL: func.func @different_inputs
// CHECK-NOT: slice_columns
// CHECK: tfm.linear %arg0
// CHECK: tfm.linear %arg1
tfm.param @wa : tensor<16x8xf32> storage <f32>
tfm.param @wb : tensor<16x8xf32> storage <f32>
func.func @different_inputs(%x: tensor<?x8xf32>, %y: tensor<?x8xf32>) -> (tensor<?x16xf32>, tensor<?x16xf32>) {
  %a_w = tfm.weight @wa : tensor<16x8xf32>
  %b_w = tfm.weight @wb : tensor<16x8xf32>
  %a = tfm.linear %x, %a_w : (tensor<?x8xf32>, tensor<16x8xf32>) -> tensor<?x16xf32>
  %b = tfm.linear %y, %b_w : (tensor<?x8xf32>, tensor<16x8xf32>) -> tensor<?x16xf32>
  return %a, %b : tensor<?x16xf32>, tensor<?x16xf32>
}

// -----

// Must not match: a bias on one of them (the other two still fuse).
// CHECK: tfm.param @"wa+wc" : tensor<32x8xf32> storage <f32> concat [@wa, @wc]
// CHECK-LABEL: func.func @bias_on_one
// CHECK: tfm.linear %{{.*}}, %{{.*}} : (tensor<?x8xf32>, tensor<32x8xf32>)
// CHECK: tfm.linear %{{.*}}, %{{.*}} bias %{{.*}} : (tensor<?x8xf32>, tensor<16x8xf32>, tensor<16xf32>)
tfm.param @wa : tensor<16x8xf32> storage <f32>
tfm.param @wb : tensor<16x8xf32> storage <f32>
tfm.param @wc : tensor<16x8xf32> storage <f32>
tfm.param @bb : tensor<16xf32> storage <f32>
func.func @bias_on_one(%h: tensor<?x8xf32>) -> (tensor<?x16xf32>, tensor<?x16xf32>, tensor<?x16xf32>) {
  %a_w = tfm.weight @wa : tensor<16x8xf32>
  %b_w = tfm.weight @wb : tensor<16x8xf32>
  %b_b = tfm.weight @bb : tensor<16xf32>
  %c_w = tfm.weight @wc : tensor<16x8xf32>
  %a = tfm.linear %h, %a_w : (tensor<?x8xf32>, tensor<16x8xf32>) -> tensor<?x16xf32>
  %b = tfm.linear %h, %b_w bias %b_b : (tensor<?x8xf32>, tensor<16x8xf32>, tensor<16xf32>) -> tensor<?x16xf32>
  %c = tfm.linear %h, %c_w : (tensor<?x8xf32>, tensor<16x8xf32>) -> tensor<?x16xf32>
  return %a, %b, %c : tensor<?x16xf32>, tensor<?x16xf32>, tensor<?x16xf32>
}

// -----

// Must not match: a weight read transposed (it does not come straight from
// tfm.weight), and a weight value that another op also reads.
// CHECK-LABEL: func.func @transposed_and_shared
// CHECK-NOT: slice_columns
// CHECK: tfm.transpose
// CHECK: tfm.linear
// CHECK: tfm.linear
// CHECK: tfm.linear
tfm.param @wa : tensor<8x16xf32> storage <f32>
tfm.param @wb : tensor<16x8xf32> storage <f32>
func.func @transposed_and_shared(%h: tensor<?x8xf32>) -> (tensor<?x16xf32>, tensor<?x16xf32>, tensor<?x16xf32>) {
  %a_w = tfm.weight @wa : tensor<8x16xf32>
  %a_t = tfm.transpose %a_w [1, 0] : (tensor<8x16xf32>) -> tensor<16x8xf32>
  %b_w = tfm.weight @wb : tensor<16x8xf32>
  %a = tfm.linear %h, %a_t : (tensor<?x8xf32>, tensor<16x8xf32>) -> tensor<?x16xf32>
  %b = tfm.linear %h, %b_w : (tensor<?x8xf32>, tensor<16x8xf32>) -> tensor<?x16xf32>
  %c = tfm.linear %h, %b_w : (tensor<?x8xf32>, tensor<16x8xf32>) -> tensor<?x16xf32>
  return %a, %b, %c : tensor<?x16xf32>, tensor<?x16xf32>, tensor<?x16xf32>
}
