// RUN: kvjit-opt %s --split-input-file | FileCheck %s
// RUN: kvjit-opt %s --split-input-file --mlir-print-op-generic | kvjit-opt --split-input-file | FileCheck %s

// CHECK-LABEL: tfm.param @token_embd.weight : tensor<512x64xf32> storage <q8_0>
tfm.param @token_embd.weight : tensor<512x64xf32> storage <q8_0>
// CHECK: tfm.param @blk.0.attn_q.weight : tensor<64x64xf32> storage <q4_0>
tfm.param @blk.0.attn_q.weight : tensor<64x64xf32> storage <q4_0>
// CHECK: tfm.param @blk.0.ffn_down.weight : tensor<64x256xf32> storage <q4_k>
tfm.param @blk.0.ffn_down.weight : tensor<64x256xf32> storage <q4_k>
// CHECK: tfm.param @blk.0.ffn_up.weight : tensor<64x64xf32> storage <q4_1> layout <rows_interleaved8>
tfm.param @blk.0.ffn_up.weight : tensor<64x64xf32> storage <q4_1> layout <rows_interleaved8>
// CHECK: tfm.param @blk.0.ffn_gate.weight : tensor<64x64xf32> storage <q8_0> layout <gguf>
tfm.param @blk.0.ffn_gate.weight : tensor<64x64xf32> storage <q8_0> layout <gguf>
// CHECK: tfm.param @blk.0.attn_q.bias : tensor<64xf32> storage <f32>
tfm.param @blk.0.attn_q.bias : tensor<64xf32> storage <f32>
// CHECK: tfm.param @output_norm.weight : tensor<64xf32> storage <bf16>
tfm.param @output_norm.weight : tensor<64xf32> storage <bf16>

// CHECK-LABEL: func.func @layers
func.func @layers(%tokens: tensor<?xi32>, %positions: tensor<?xi32>) -> tensor<?x64xf32> {
  // CHECK: %[[TABLE:.*]] = tfm.weight @token_embd.weight : tensor<512x64xf32>
  %table = tfm.weight @token_embd.weight : tensor<512x64xf32>
  // CHECK: %[[X:.*]] = tfm.embedding %[[TABLE]], %{{.*}} : (tensor<512x64xf32>, tensor<?xi32>) -> tensor<?x64xf32>
  %x = tfm.embedding %table, %tokens : (tensor<512x64xf32>, tensor<?xi32>) -> tensor<?x64xf32>
  %norm_w = tfm.weight @output_norm.weight : tensor<64xf32>
  // CHECK: tfm.rms_norm %[[X]], %{{.*}} {epsilon = 9.99999974E-6 : f32} : tensor<?x64xf32>, tensor<64xf32>
  %n = tfm.rms_norm %x, %norm_w {epsilon = 1.0e-05 : f32} : tensor<?x64xf32>, tensor<64xf32>
  // CHECK: tfm.layer_norm %{{.*}}, %{{.*}} bias %{{.*}} {epsilon = 9.99999974E-6 : f32} : tensor<?x64xf32>, tensor<64xf32>, tensor<64xf32>
  %ln = tfm.layer_norm %n, %norm_w bias %norm_w {epsilon = 1.0e-05 : f32} : tensor<?x64xf32>, tensor<64xf32>, tensor<64xf32>
  %wq = tfm.weight @blk.0.attn_q.weight : tensor<64x64xf32>
  %bq = tfm.weight @blk.0.attn_q.bias : tensor<64xf32>
  // CHECK: tfm.linear %{{.*}}, %{{.*}} : (tensor<?x64xf32>, tensor<64x64xf32>) -> tensor<?x64xf32>
  %q0 = tfm.linear %ln, %wq : (tensor<?x64xf32>, tensor<64x64xf32>) -> tensor<?x64xf32>
  // CHECK: tfm.linear %{{.*}}, %{{.*}} bias %{{.*}} : (tensor<?x64xf32>, tensor<64x64xf32>, tensor<64xf32>) -> tensor<?x64xf32>
  %q = tfm.linear %q0, %wq bias %bq : (tensor<?x64xf32>, tensor<64x64xf32>, tensor<64xf32>) -> tensor<?x64xf32>
  // CHECK: tfm.reshape %{{.*}} : (tensor<?x64xf32>) -> tensor<?x8x8xf32>
  %heads = tfm.reshape %q : (tensor<?x64xf32>) -> tensor<?x8x8xf32>
  // CHECK: tfm.rope %{{.*}}, %{{.*}} {style = #tfm.rope_style<interleaved>, theta = 1.000000e+04 : f32} : tensor<?x8x8xf32>, tensor<?xi32>
  %r = tfm.rope %heads, %positions {style = #tfm.rope_style<interleaved>, theta = 10000.0 : f32} : tensor<?x8x8xf32>, tensor<?xi32>
  // CHECK: tfm.rope %{{.*}}, %{{.*}} {rotary_dim = 4 : i64, scaling = #tfm.rope_scaling<kind = llama3, factor = 8.000000e+00, original_context = 8192>, style = #tfm.rope_style<neox>, theta = 5.000000e+05 : f32}
  %r2 = tfm.rope %r, %positions {style = #tfm.rope_style<neox>, theta = 500000.0 : f32, rotary_dim = 4 : i64, scaling = #tfm.rope_scaling<kind = llama3, factor = 8.0, original_context = 8192>} : tensor<?x8x8xf32>, tensor<?xi32>
  // CHECK: #tfm.rope_scaling<kind = llama3, factor = 3.200000e+01, low_freq_factor = 2.000000e+00, high_freq_factor = 8.000000e+00, original_context = 4096>
  %r2b = tfm.rope %r2, %positions {style = #tfm.rope_style<neox>, theta = 500000.0 : f32, scaling = #tfm.rope_scaling<kind = llama3, factor = 32.0, low_freq_factor = 2.0, high_freq_factor = 8.0, original_context = 4096>} : tensor<?x8x8xf32>, tensor<?xi32>
  // CHECK: #tfm.rope_scaling<kind = linear, factor = 2.000000e+00>
  %r3 = tfm.rope %r2b, %positions {style = #tfm.rope_style<neox>, theta = 10000.0 : f32, scaling = #tfm.rope_scaling<kind = linear, factor = 2.0>} : tensor<?x8x8xf32>, tensor<?xi32>
  // CHECK: tfm.rope %{{.*}}, %{{.*}} {freq_factors = array<f32: 1.000000e+00, 1.500000e+00, 4.000000e+00, 8.000000e+00>
  %r4 = tfm.rope %r3, %positions {style = #tfm.rope_style<interleaved>, theta = 500000.0 : f32, freq_factors = array<f32: 1.0, 1.5, 4.0, 8.0>} : tensor<?x8x8xf32>, tensor<?xi32>
  %flat = tfm.reshape %r4 : (tensor<?x8x8xf32>) -> tensor<?x64xf32>
  // CHECK: tfm.add %{{.*}}, %{{.*}} : tensor<?x64xf32>
  %sum = tfm.add %flat, %x : tensor<?x64xf32>
  // CHECK: tfm.mul %{{.*}}, %{{.*}} : tensor<?x64xf32>
  %prod = tfm.mul %sum, %sum : tensor<?x64xf32>
  // CHECK: tfm.silu %{{.*}} : tensor<?x64xf32>
  %s = tfm.silu %prod : tensor<?x64xf32>
  // CHECK: tfm.gelu %{{.*}} : tensor<?x64xf32>
  %g = tfm.gelu %s : tensor<?x64xf32>
  // CHECK: tfm.gelu %{{.*}} {approximate_tanh} : tensor<?x64xf32>
  %g2 = tfm.gelu %g {approximate_tanh} : tensor<?x64xf32>
  // CHECK: tfm.tanh %{{.*}} : tensor<?x64xf32>
  %t = tfm.tanh %g2 : tensor<?x64xf32>
  // CHECK: tfm.scale %{{.*}}, 1.250000e-01 : tensor<?x64xf32>
  %scaled = tfm.scale %t, 0.125 : tensor<?x64xf32>
  return %scaled : tensor<?x64xf32>
}

// -----

// CHECK-LABEL: func.func @attention
func.func @attention(%q: tensor<?x8x8xf32>, %k: tensor<?x4x8xf32>, %v: tensor<?x4x8xf32>) -> tensor<8x?x8xf32> {
  // CHECK: tfm.repeat %{{.*}} {axis = 1 : i64, repeats = 2 : i64} : (tensor<?x4x8xf32>) -> tensor<?x8x8xf32>
  %k8 = tfm.repeat %k {axis = 1 : i64, repeats = 2 : i64} : (tensor<?x4x8xf32>) -> tensor<?x8x8xf32>
  %v8 = tfm.repeat %v {axis = 1 : i64, repeats = 2 : i64} : (tensor<?x4x8xf32>) -> tensor<?x8x8xf32>
  // CHECK: tfm.transpose %{{.*}} [1, 0, 2] : (tensor<?x8x8xf32>) -> tensor<8x?x8xf32>
  %qh = tfm.transpose %q [1, 0, 2] : (tensor<?x8x8xf32>) -> tensor<8x?x8xf32>
  %kt = tfm.transpose %k8 [1, 2, 0] : (tensor<?x8x8xf32>) -> tensor<8x8x?xf32>
  %vh = tfm.transpose %v8 [1, 0, 2] : (tensor<?x8x8xf32>) -> tensor<8x?x8xf32>
  // CHECK: tfm.matmul %{{.*}}, %{{.*}} : (tensor<8x?x8xf32>, tensor<8x8x?xf32>) -> tensor<8x?x?xf32>
  %scores = tfm.matmul %qh, %kt : (tensor<8x?x8xf32>, tensor<8x8x?xf32>) -> tensor<8x?x?xf32>
  %scaled = tfm.scale %scores, 0.353553385 : tensor<8x?x?xf32>
  // CHECK: tfm.causal_mask %{{.*}} : tensor<8x?x?xf32>
  %masked = tfm.causal_mask %scaled : tensor<8x?x?xf32>
  // CHECK: tfm.softmax %{{.*}} {axis = -1 : i64} : tensor<8x?x?xf32>
  %p = tfm.softmax %masked {axis = -1 : i64} : tensor<8x?x?xf32>
  %out = tfm.matmul %p, %vh : (tensor<8x?x?xf32>, tensor<8x?x8xf32>) -> tensor<8x?x8xf32>
  return %out : tensor<8x?x8xf32>
}

// -----

// CHECK-LABEL: func.func @fused_attention
func.func @fused_attention(%q: tensor<?x8x8xf32>, %k: tensor<?x4x8xf32>, %v: tensor<?x4x8xf32>) -> tensor<?x8x8xf32> {
  // CHECK: tfm.attention %{{.*}}, %{{.*}}, %{{.*}} {causal, scale = 0.353553385 : f32} : (tensor<?x8x8xf32>, tensor<?x4x8xf32>, tensor<?x4x8xf32>) -> tensor<?x8x8xf32>
  %o = tfm.attention %q, %k, %v {causal, scale = 0.353553385 : f32} : (tensor<?x8x8xf32>, tensor<?x4x8xf32>, tensor<?x4x8xf32>) -> tensor<?x8x8xf32>
  return %o : tensor<?x8x8xf32>
}

// -----

// Gemma 2's soft-capped scores beside a sliding window.
// CHECK-LABEL: func.func @softcapped_attention
func.func @softcapped_attention(%q: tensor<?x8x8xf32>, %k: tensor<?x4x8xf32>, %v: tensor<?x4x8xf32>) -> tensor<?x8x8xf32> {
  // CHECK: tfm.attention %{{.*}}, %{{.*}}, %{{.*}} {causal, scale = 6.250000e-02 : f32, softcap = 5.000000e+01 : f32, window = 4096 : i64}
  %o = tfm.attention %q, %k, %v {causal, scale = 0.0625 : f32, softcap = 50.0 : f32, window = 4096 : i64} : (tensor<?x8x8xf32>, tensor<?x4x8xf32>, tensor<?x4x8xf32>) -> tensor<?x8x8xf32>
  return %o : tensor<?x8x8xf32>
}

// -----

// CHECK-LABEL: func.func @gather
func.func @gather(%x: tensor<?x64xf32>, %rows: tensor<?xi32>) -> tensor<?x64xf32> {
  // CHECK: tfm.gather_rows %{{.*}}, %{{.*}} : (tensor<?x64xf32>, tensor<?xi32>) -> tensor<?x64xf32>
  %g = tfm.gather_rows %x, %rows : (tensor<?x64xf32>, tensor<?xi32>) -> tensor<?x64xf32>
  return %g : tensor<?x64xf32>
}

// -----

// A param the compiler concatenates from two of the model's, and a column
// view of a fused result.
// CHECK: tfm.param @ab : tensor<32x8xf32> storage <f32> concat [@a, @b]
// CHECK-LABEL: func.func @slice
// CHECK: tfm.slice_columns %{{.*}} {offset = 16 : i64, size = 16 : i64} : (tensor<?x32xf32>) -> tensor<?x16xf32>
tfm.param @a : tensor<16x8xf32> storage <f32>
tfm.param @b : tensor<16x8xf32> storage <f32>
tfm.param @ab : tensor<32x8xf32> storage <f32> concat [@a, @b]
func.func @slice(%x: tensor<?x32xf32>) -> tensor<?x16xf32> {
  %s = tfm.slice_columns %x {offset = 16 : i64, size = 16 : i64} : (tensor<?x32xf32>) -> tensor<?x16xf32>
  return %s : tensor<?x16xf32>
}

// -----

// Gemma's norm scale 1 + w, made by the compiler from the model's bf16 w and
// read like any weight.
// CHECK: tfm.param @norm.weight : tensor<8xf32> storage <bf16>
// CHECK: tfm.param @norm.weight.plus_one : tensor<8xf32> storage <f32> shifted @norm.weight by 1.000000e+00
// CHECK-LABEL: func.func @shifted_norm
// CHECK: tfm.weight @norm.weight.plus_one : tensor<8xf32>
tfm.param @norm.weight : tensor<8xf32> storage <bf16>
tfm.param @norm.weight.plus_one : tensor<8xf32> storage <f32> shifted @norm.weight by 1.0
func.func @shifted_norm(%x: tensor<?x8xf32>) -> tensor<?x8xf32> {
  %w = tfm.weight @norm.weight.plus_one : tensor<8xf32>
  %y = tfm.rms_norm %x, %w {epsilon = 1.0e-06 : f32} : tensor<?x8xf32>, tensor<8xf32>
  return %y : tensor<?x8xf32>
}
