// RUN: kvjit-opt %s --shard-tensor-parallel="ranks=2 rank=1" --split-input-file --verify-diagnostics

// One query head cannot be shared out over two ranks.
tfm.param @token_embd.weight : tensor<6x32xf32> storage <f32>
tfm.param @blk.0.attn_q.weight : tensor<8x32xf32> storage <f32>
tfm.param @blk.0.attn_k.weight : tensor<8x32xf32> storage <f32>
tfm.param @blk.0.attn_v.weight : tensor<8x32xf32> storage <f32>
tfm.param @blk.0.attn_output.weight : tensor<32x8xf32> storage <f32>
func.func @forward(%tokens: tensor<?xi32>, %positions: tensor<?xi32>) -> tensor<?x6xf32> {
  %embed = tfm.weight @token_embd.weight : tensor<6x32xf32>
  %x = tfm.embedding %embed, %tokens : (tensor<6x32xf32>, tensor<?xi32>) -> tensor<?x32xf32>
  %wq = tfm.weight @blk.0.attn_q.weight : tensor<8x32xf32>
  %q = tfm.linear %x, %wq : (tensor<?x32xf32>, tensor<8x32xf32>) -> tensor<?x8xf32>
  %wk = tfm.weight @blk.0.attn_k.weight : tensor<8x32xf32>
  %k = tfm.linear %x, %wk : (tensor<?x32xf32>, tensor<8x32xf32>) -> tensor<?x8xf32>
  %wv = tfm.weight @blk.0.attn_v.weight : tensor<8x32xf32>
  %v = tfm.linear %x, %wv : (tensor<?x32xf32>, tensor<8x32xf32>) -> tensor<?x8xf32>
  %qh = tfm.reshape %q : (tensor<?x8xf32>) -> tensor<?x1x8xf32>
  %kh = tfm.reshape %k : (tensor<?x8xf32>) -> tensor<?x1x8xf32>
  %vh = tfm.reshape %v : (tensor<?x8xf32>) -> tensor<?x1x8xf32>
  // expected-error @+1 {{has 1 query heads in 1 KV heads, which 2 ranks cannot share}}
  %att = tfm.attention %qh, %kh, %vh {causal, scale = 0.35 : f32} : (tensor<?x1x8xf32>, tensor<?x1x8xf32>, tensor<?x1x8xf32>) -> tensor<?x1x8xf32>
  %flat = tfm.reshape %att : (tensor<?x1x8xf32>) -> tensor<?x8xf32>
  %wo = tfm.weight @blk.0.attn_output.weight : tensor<32x8xf32>
  %o = tfm.linear %flat, %wo : (tensor<?x8xf32>, tensor<32x8xf32>) -> tensor<?x32xf32>
  %x1 = tfm.add %x, %o : tensor<?x32xf32>
  %logits = tfm.linear %x1, %embed : (tensor<?x32xf32>, tensor<6x32xf32>) -> tensor<?x6xf32>
  return %logits : tensor<?x6xf32>
}

// -----

tfm.param @a.weight : tensor<4x8xf32> storage <f32>
tfm.param @b.weight : tensor<4x8xf32> storage <f32>
// expected-error @+1 {{is a concatenation of projections: shard-tensor-parallel runs before fuse-projections}}
tfm.param @ab.weight : tensor<8x8xf32> storage <f32> concat [@a.weight, @b.weight]
