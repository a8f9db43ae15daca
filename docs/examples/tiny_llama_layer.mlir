// One Llama decoder block in tfm IR, written by hand: hidden 64, 8 query
// heads and 4 KV heads of 8 (grouped-query attention), FFN 172 with SwiGLU.
// `kvjit-opt tiny_llama_layer.mlir` parses, verifies and prints it.

tfm.param @blk.0.attn_norm.weight : tensor<64xf32> storage <f32>
tfm.param @blk.0.attn_q.weight : tensor<64x64xf32> storage <q8_0>
tfm.param @blk.0.attn_k.weight : tensor<32x64xf32> storage <q8_0>
tfm.param @blk.0.attn_v.weight : tensor<32x64xf32> storage <q8_0>
tfm.param @blk.0.attn_output.weight : tensor<64x64xf32> storage <q8_0>
tfm.param @blk.0.ffn_norm.weight : tensor<64xf32> storage <f32>
tfm.param @blk.0.ffn_gate.weight : tensor<172x64xf32> storage <f32>
tfm.param @blk.0.ffn_up.weight : tensor<172x64xf32> storage <f32>
tfm.param @blk.0.ffn_down.weight : tensor<64x172xf32> storage <f32>

func.func @block(%x: tensor<?x64xf32>, %positions: tensor<?xi32>) -> tensor<?x64xf32> {
  %attn_norm_w = tfm.weight @blk.0.attn_norm.weight : tensor<64xf32>
  %h = tfm.rms_norm %x, %attn_norm_w {epsilon = 1.0e-5 : f32} : tensor<?x64xf32>, tensor<64xf32>

  %wq = tfm.weight @blk.0.attn_q.weight : tensor<64x64xf32>
  %wk = tfm.weight @blk.0.attn_k.weight : tensor<32x64xf32>
  %wv = tfm.weight @blk.0.attn_v.weight : tensor<32x64xf32>
  %q2 = tfm.linear %h, %wq : (tensor<?x64xf32>, tensor<64x64xf32>) -> tensor<?x64xf32>
  %k2 = tfm.linear %h, %wk : (tensor<?x64xf32>, tensor<32x64xf32>) -> tensor<?x32xf32>
  %v2 = tfm.linear %h, %wv : (tensor<?x64xf32>, tensor<32x64xf32>) -> tensor<?x32xf32>
  %q3 = tfm.reshape %q2 : (tensor<?x64xf32>) -> tensor<?x8x8xf32>
  %k3 = tfm.reshape %k2 : (tensor<?x32xf32>) -> tensor<?x4x8xf32>
  %v3 = tfm.reshape %v2 : (tensor<?x32xf32>) -> tensor<?x4x8xf32>
  %q = tfm.rope %q3, %positions {style = #tfm.rope_style<interleaved>, theta = 10000.0 : f32} : tensor<?x8x8xf32>, tensor<?xi32>
  %k = tfm.rope %k3, %positions {style = #tfm.rope_style<interleaved>, theta = 10000.0 : f32} : tensor<?x4x8xf32>, tensor<?xi32>

  // softmax(Q·Kᵀ·scale + causal mask)·V, each KV head shared by two query heads.
  %k_rep = tfm.repeat %k {axis = 1 : i64, repeats = 2 : i64} : (tensor<?x4x8xf32>) -> tensor<?x8x8xf32>
  %v_rep = tfm.repeat %v3 {axis = 1 : i64, repeats = 2 : i64} : (tensor<?x4x8xf32>) -> tensor<?x8x8xf32>
  %qh = tfm.transpose %q [1, 0, 2] : (tensor<?x8x8xf32>) -> tensor<8x?x8xf32>
  %kt = tfm.transpose %k_rep [1, 2, 0] : (tensor<?x8x8xf32>) -> tensor<8x8x?xf32>
  %vh = tfm.transpose %v_rep [1, 0, 2] : (tensor<?x8x8xf32>) -> tensor<8x?x8xf32>
  %scores = tfm.matmul %qh, %kt : (tensor<8x?x8xf32>, tensor<8x8x?xf32>) -> tensor<8x?x?xf32>
  %scaled = tfm.scale %scores, 0.353553385 : tensor<8x?x?xf32>
  %masked = tfm.causal_mask %scaled : tensor<8x?x?xf32>
  %probs = tfm.softmax %masked {axis = -1 : i64} : tensor<8x?x?xf32>
  %ctx_h = tfm.matmul %probs, %vh : (tensor<8x?x?xf32>, tensor<8x?x8xf32>) -> tensor<8x?x8xf32>
  %ctx_t = tfm.transpose %ctx_h [1, 0, 2] : (tensor<8x?x8xf32>) -> tensor<?x8x8xf32>
  %ctx = tfm.reshape %ctx_t : (tensor<?x8x8xf32>) -> tensor<?x64xf32>
  %wo = tfm.weight @blk.0.attn_output.weight : tensor<64x64xf32>
  %attn = tfm.linear %ctx, %wo : (tensor<?x64xf32>, tensor<64x64xf32>) -> tensor<?x64xf32>
  %x1 = tfm.add %x, %attn : tensor<?x64xf32>

  %ffn_norm_w = tfm.weight @blk.0.ffn_norm.weight : tensor<64xf32>
  %h2 = tfm.rms_norm %x1, %ffn_norm_w {epsilon = 1.0e-5 : f32} : tensor<?x64xf32>, tensor<64xf32>
  %wg = tfm.weight @blk.0.ffn_gate.weight : tensor<172x64xf32>
  %wu = tfm.weight @blk.0.ffn_up.weight : tensor<172x64xf32>
  %wd = tfm.weight @blk.0.ffn_down.weight : tensor<64x172xf32>
  %gate = tfm.linear %h2, %wg : (tensor<?x64xf32>, tensor<172x64xf32>) -> tensor<?x172xf32>
  %up = tfm.linear %h2, %wu : (tensor<?x64xf32>, tensor<172x64xf32>) -> tensor<?x172xf32>
  %act = tfm.silu %gate : tensor<?x172xf32>
  %gated = tfm.mul %act, %up : tensor<?x172xf32>
  %down = tfm.linear %gated, %wd : (tensor<?x172xf32>, tensor<64x172xf32>) -> tensor<?x64xf32>
  %out = tfm.add %x1, %down : tensor<?x64xf32>
  return %out : tensor<?x64xf32>
}
