// RUN: kvjit-opt %s --shard-tensor-parallel="ranks=2 rank=1" --split-input-file | FileCheck %s --check-prefix=RANK1
// RUN: kvjit-opt %s --shard-tensor-parallel="ranks=2 rank=0" --split-input-file | FileCheck %s --check-prefix=RANK0
// RUN: kvjit-opt %s --shard-tensor-parallel="ranks=1" --split-input-file | FileCheck %s --check-prefix=ONE

// One layer of four query heads over two KV heads, Q with a bias, and an
// output projection with a bias, tied to the embedding, after a soft cap.
// Each rank gets one KV head and its two query heads: the rows of Q, K, V
// (and Q's bias) for them, and the columns of the output projection,
// followed by an all-reduce; the output projection's bias stays on rank 0.
// The feed-forward's 16 columns are shared out 8 and 8; the vocabulary's 6
// rows 3 and 3, gathered before the soft cap. The embedding and the norms
// stay whole.
// RANK1: module attributes {dist.rank = 1 : i64, dist.ranks = 2 : i64}
// RANK1: tfm.param @token_embd.weight.rank1 : tensor<3x8xf32> storage <f32> sliced @token_embd.weight axis 0 from 3
// RANK1: tfm.param @blk.0.attn_q.weight.rank1 : tensor<4x8xf32> storage <f32> sliced @blk.0.attn_q.weight axis 0 from 4
// RANK1: tfm.param @blk.0.attn_q.bias.rank1 : tensor<4xf32> storage <f32> sliced @blk.0.attn_q.bias axis 0 from 4
// RANK1: tfm.param @blk.0.attn_k.weight.rank1 : tensor<2x8xf32> storage <f32> sliced @blk.0.attn_k.weight axis 0 from 2
// RANK1: tfm.param @blk.0.attn_output.weight.rank1 : tensor<8x4xf32> storage <f32> sliced @blk.0.attn_output.weight axis 1 from 4
// RANK1: tfm.param @blk.0.ffn_down.weight.rank1 : tensor<8x8xf32> storage <f32> sliced @blk.0.ffn_down.weight axis 1 from 8
// RANK1-LABEL: func.func @forward
// RANK1: %[[EMBED:.*]] = tfm.weight @token_embd.weight : tensor<6x8xf32>
// RANK1: tfm.embedding %[[EMBED]]
// RANK1: tfm.linear %{{.*}}, %{{.*}} bias %{{.*}} : (tensor<?x8xf32>, tensor<4x8xf32>, tensor<4xf32>) -> tensor<?x4xf32>
// RANK1: tfm.rope %{{.*}}, %{{.*}} {{.*}} : tensor<?x2x2xf32>, tensor<?xi32>
// RANK1: tfm.rope %{{.*}}, %{{.*}} {{.*}} : tensor<?x1x2xf32>, tensor<?xi32>
// RANK1: tfm.attention {{.*}} : (tensor<?x2x2xf32>, tensor<?x1x2xf32>, tensor<?x1x2xf32>) -> tensor<?x2x2xf32>
// RANK1: %[[PARTIAL:.*]] = tfm.linear %{{.*}}, %{{.*}} : (tensor<?x4xf32>, tensor<8x4xf32>) -> tensor<?x8xf32>
// RANK1-NEXT: %[[ATTENDED:.*]] = dist.all_reduce %[[PARTIAL]] : tensor<?x8xf32>
// RANK1-NEXT: tfm.add %{{.*}}, %[[ATTENDED]]
// RANK1: tfm.silu %{{.*}} : tensor<?x8xf32>
// RANK1: %[[DOWN:.*]] = tfm.linear %{{.*}}, %{{.*}} : (tensor<?x8xf32>, tensor<8x8xf32>) -> tensor<?x8xf32>
// RANK1-NEXT: dist.all_reduce %[[DOWN]] : tensor<?x8xf32>
// RANK1: %[[VOCAB:.*]] = tfm.weight @token_embd.weight.rank1 : tensor<3x8xf32>
// RANK1-NEXT: %[[PART:.*]] = tfm.linear %{{.*}}, %[[VOCAB]] : (tensor<?x8xf32>, tensor<3x8xf32>) -> tensor<?x3xf32>
// RANK1-NEXT: %[[LOGITS:.*]] = dist.all_gather %[[PART]] columns [3, 3] rank 1 : (tensor<?x3xf32>) -> tensor<?x6xf32>
// RANK1-NEXT: %[[CAPPED:.*]] = tfm.scale %[[LOGITS]], 5.000000e-01 : tensor<?x6xf32>
// RANK1-NEXT: return %[[CAPPED]]
// RANK0: module attributes {dist.rank = 0 : i64, dist.ranks = 2 : i64}
// RANK0-LABEL: func.func @forward
// RANK0: tfm.linear %{{.*}}, %{{.*}} bias %{{.*}} : (tensor<?x4xf32>, tensor<8x4xf32>, tensor<8xf32>) -> tensor<?x8xf32>
// RANK0: dist.all_gather %{{.*}} columns [3, 3] rank 0
// ONE-NOT: dist.
// ONE-LABEL: func.func @forward
// ONE: tfm.attention {{.*}} -> tensor<?x4x2xf32>
// ONE-NOT: dist.
tfm.param @token_embd.weight : tensor<6x8xf32> storage <f32>
tfm.param @blk.0.attn_norm.weight : tensor<8xf32> storage <f32>
tfm.param @blk.0.attn_q.weight : tensor<8x8xf32> storage <f32>
tfm.param @blk.0.attn_q.bias : tensor<8xf32> storage <f32>
tfm.param @blk.0.attn_k.weight : tensor<4x8xf32> storage <f32>
tfm.param @blk.0.attn_v.weight : tensor<4x8xf32> storage <f32>
tfm.param @blk.0.attn_output.weight : tensor<8x8xf32> storage <f32>
tfm.param @blk.0.attn_output.bias : tensor<8xf32> storage <f32>
tfm.param @blk.0.ffn_norm.weight : tensor<8xf32> storage <f32>
tfm.param @blk.0.ffn_gate.weight : tensor<16x8xf32> storage <f32>
tfm.param @blk.0.ffn_up.weight : tensor<16x8xf32> storage <f32>
tfm.param @blk.0.ffn_down.weight : tensor<8x16xf32> storage <f32>
tfm.param @output_norm.weight : tensor<8xf32> storage <f32>
func.func @forward(%tokens: tensor<?xi32>, %positions: tensor<?xi32>) -> tensor<?x6xf32> {
  %embed = tfm.weight @token_embd.weight : tensor<6x8xf32>
  %x = tfm.embedding %embed, %tokens : (tensor<6x8xf32>, tensor<?xi32>) -> tensor<?x8xf32>
  %an = tfm.weight @blk.0.attn_norm.weight : tensor<8xf32>
  %h = tfm.rms_norm %x, %an {epsilon = 1.0e-5 : f32} : tensor<?x8xf32>, tensor<8xf32>
  %wq = tfm.weight @blk.0.attn_q.weight : tensor<8x8xf32>
  %bq = tfm.weight @blk.0.attn_q.bias : tensor<8xf32>
  %q = tfm.linear %h, %wq bias %bq : (tensor<?x8xf32>, tensor<8x8xf32>, tensor<8xf32>) -> tensor<?x8xf32>
  %wk = tfm.weight @blk.0.attn_k.weight : tensor<4x8xf32>
  %k = tfm.linear %h, %wk : (tensor<?x8xf32>, tensor<4x8xf32>) -> tensor<?x4xf32>
  %wv = tfm.weight @blk.0.attn_v.weight : tensor<4x8xf32>
  %v = tfm.linear %h, %wv : (tensor<?x8xf32>, tensor<4x8xf32>) -> tensor<?x4xf32>
  %qh = tfm.reshape %q : (tensor<?x8xf32>) -> tensor<?x4x2xf32>
  %qr = tfm.rope %qh, %positions {style = #tfm.rope_style<neox>, theta = 1.0e4 : f32} : tensor<?x4x2xf32>, tensor<?xi32>
  %kh = tfm.reshape %k : (tensor<?x4xf32>) -> tensor<?x2x2xf32>
  %kr = tfm.rope %kh, %positions {style = #tfm.rope_style<neox>, theta = 1.0e4 : f32} : tensor<?x2x2xf32>, tensor<?xi32>
  %vh = tfm.reshape %v : (tensor<?x4xf32>) -> tensor<?x2x2xf32>
  %att = tfm.attention %qr, %kr, %vh {causal, scale = 0.7 : f32} : (tensor<?x4x2xf32>, tensor<?x2x2xf32>, tensor<?x2x2xf32>) -> tensor<?x4x2xf32>
  %flat = tfm.reshape %att : (tensor<?x4x2xf32>) -> tensor<?x8xf32>
  %wo = tfm.weight @blk.0.attn_output.weight : tensor<8x8xf32>
  %bo = tfm.weight @blk.0.attn_output.bias : tensor<8xf32>
  %o = tfm.linear %flat, %wo bias %bo : (tensor<?x8xf32>, tensor<8x8xf32>, tensor<8xf32>) -> tensor<?x8xf32>
  %x1 = tfm.add %x, %o : tensor<?x8xf32>
  %fn = tfm.weight @blk.0.ffn_norm.weight : tensor<8xf32>
  %h1 = tfm.rms_norm %x1, %fn {epsilon = 1.0e-5 : f32} : tensor<?x8xf32>, tensor<8xf32>
  %wg = tfm.weight @blk.0.ffn_gate.weight : tensor<16x8xf32>
  %g = tfm.linear %h1, %wg : (tensor<?x8xf32>, tensor<16x8xf32>) -> tensor<?x16xf32>
  %wu = tfm.weight @blk.0.ffn_up.weight : tensor<16x8xf32>
  %u = tfm.linear %h1, %wu : (tensor<?x8xf32>, tensor<16x8xf32>) -> tensor<?x16xf32>
  %s = tfm.silu %g : tensor<?x16xf32>
  %m = tfm.mul %s, %u : tensor<?x16xf32>
  %wd = tfm.weight @blk.0.ffn_down.weight : tensor<8x16xf32>
  %d = tfm.linear %m, %wd : (tensor<?x16xf32>, tensor<8x16xf32>) -> tensor<?x8xf32>
  %x2 = tfm.add %x1, %d : tensor<?x8xf32>
  %on = tfm.weight @output_norm.weight : tensor<8xf32>
  %h2 = tfm.rms_norm %x2, %on {epsilon = 1.0e-5 : f32} : tensor<?x8xf32>, tensor<8xf32>
  %logits = tfm.linear %h2, %embed : (tensor<?x8xf32>, tensor<6x8xf32>) -> tensor<?x6xf32>
  %capped = tfm.scale %logits, 0.5 : tensor<?x6xf32>
  return %capped : tensor<?x6xf32>
}

// -----

// Four query heads over one KV head: the KV head is replicated on both
// ranks, and each gets two of its query heads.
// RANK1-LABEL: func.func @forward
// RANK1: tfm.weight @blk.0.attn_k.weight.rank1 : tensor<2x8xf32>
// RANK1: tfm.attention {{.*}} : (tensor<?x2x2xf32>, tensor<?x1x2xf32>, tensor<?x1x2xf32>) -> tensor<?x2x2xf32>
// RANK0-LABEL: func.func @forward
// RANK0: tfm.attention {{.*}} : (tensor<?x2x2xf32>, tensor<?x1x2xf32>, tensor<?x1x2xf32>) -> tensor<?x2x2xf32>
tfm.param @token_embd.weight : tensor<6x8xf32> storage <f32>
tfm.param @blk.0.attn_norm.weight : tensor<8xf32> storage <f32>
tfm.param @blk.0.attn_q.weight : tensor<8x8xf32> storage <f32>
tfm.param @blk.0.attn_q.bias : tensor<8xf32> storage <f32>
tfm.param @blk.0.attn_k.weight : tensor<2x8xf32> storage <f32>
tfm.param @blk.0.attn_v.weight : tensor<2x8xf32> storage <f32>
tfm.param @blk.0.attn_output.weight : tensor<8x8xf32> storage <f32>
tfm.param @blk.0.attn_output.bias : tensor<8xf32> storage <f32>
tfm.param @blk.0.ffn_norm.weight : tensor<8xf32> storage <f32>
tfm.param @blk.0.ffn_gate.weight : tensor<16x8xf32> storage <f32>
tfm.param @blk.0.ffn_up.weight : tensor<16x8xf32> storage <f32>
tfm.param @blk.0.ffn_down.weight : tensor<8x16xf32> storage <f32>
tfm.param @output_norm.weight : tensor<8xf32> storage <f32>
func.func @forward(%tokens: tensor<?xi32>, %positions: tensor<?xi32>) -> tensor<?x6xf32> {
  %embed = tfm.weight @token_embd.weight : tensor<6x8xf32>
  %x = tfm.embedding %embed, %tokens : (tensor<6x8xf32>, tensor<?xi32>) -> tensor<?x8xf32>
  %an = tfm.weight @blk.0.attn_norm.weight : tensor<8xf32>
  %h = tfm.rms_norm %x, %an {epsilon = 1.0e-5 : f32} : tensor<?x8xf32>, tensor<8xf32>
  %wq = tfm.weight @blk.0.attn_q.weight : tensor<8x8xf32>
  %bq = tfm.weight @blk.0.attn_q.bias : tensor<8xf32>
  %q = tfm.linear %h, %wq bias %bq : (tensor<?x8xf32>, tensor<8x8xf32>, tensor<8xf32>) -> tensor<?x8xf32>
  %wk = tfm.weight @blk.0.attn_k.weight : tensor<2x8xf32>
  %k = tfm.linear %h, %wk : (tensor<?x8xf32>, tensor<2x8xf32>) -> tensor<?x2xf32>
  %wv = tfm.weight @blk.0.attn_v.weight : tensor<2x8xf32>
  %v = tfm.linear %h, %wv : (tensor<?x8xf32>, tensor<2x8xf32>) -> tensor<?x2xf32>
  %qh = tfm.reshape %q : (tensor<?x8xf32>) -> tensor<?x4x2xf32>
  %qr = tfm.rope %qh, %positions {style = #tfm.rope_style<neox>, theta = 1.0e4 : f32} : tensor<?x4x2xf32>, tensor<?xi32>
  %kh = tfm.reshape %k : (tensor<?x2xf32>) -> tensor<?x1x2xf32>
  %kr = tfm.rope %kh, %positions {style = #tfm.rope_style<neox>, theta = 1.0e4 : f32} : tensor<?x1x2xf32>, tensor<?xi32>
  %vh = tfm.reshape %v : (tensor<?x2xf32>) -> tensor<?x1x2xf32>
  %att = tfm.attention %qr, %kr, %vh {causal, scale = 0.7 : f32} : (tensor<?x4x2xf32>, tensor<?x1x2xf32>, tensor<?x1x2xf32>) -> tensor<?x4x2xf32>
  %flat = tfm.reshape %att : (tensor<?x4x2xf32>) -> tensor<?x8xf32>
  %wo = tfm.weight @blk.0.attn_output.weight : tensor<8x8xf32>
  %bo = tfm.weight @blk.0.attn_output.bias : tensor<8xf32>
  %o = tfm.linear %flat, %wo bias %bo : (tensor<?x8xf32>, tensor<8x8xf32>, tensor<8xf32>) -> tensor<?x8xf32>
  %x1 = tfm.add %x, %o : tensor<?x8xf32>
  %fn = tfm.weight @blk.0.ffn_norm.weight : tensor<8xf32>
  %h1 = tfm.rms_norm %x1, %fn {epsilon = 1.0e-5 : f32} : tensor<?x8xf32>, tensor<8xf32>
  %wg = tfm.weight @blk.0.ffn_gate.weight : tensor<16x8xf32>
  %g = tfm.linear %h1, %wg : (tensor<?x8xf32>, tensor<16x8xf32>) -> tensor<?x16xf32>
  %wu = tfm.weight @blk.0.ffn_up.weight : tensor<16x8xf32>
  %u = tfm.linear %h1, %wu : (tensor<?x8xf32>, tensor<16x8xf32>) -> tensor<?x16xf32>
  %s = tfm.silu %g : tensor<?x16xf32>
  %m = tfm.mul %s, %u : tensor<?x16xf32>
  %wd = tfm.weight @blk.0.ffn_down.weight : tensor<8x16xf32>
  %d = tfm.linear %m, %wd : (tensor<?x16xf32>, tensor<8x16xf32>) -> tensor<?x8xf32>
  %x2 = tfm.add %x1, %d : tensor<?x8xf32>
  %on = tfm.weight @output_norm.weight : tensor<8xf32>
  %h2 = tfm.rms_norm %x2, %on {epsilon = 1.0e-5 : f32} : tensor<?x8xf32>, tensor<8xf32>
  %logits = tfm.linear %h2, %embed : (tensor<?x8xf32>, tensor<6x8xf32>) -> tensor<?x6xf32>
  %capped = tfm.scale %logits, 0.5 : tensor<?x6xf32>
  return %capped : tensor<?x6xf32>
}

// -----

// Two heads of 8 over two ranks: rank 1's columns of the q8_0 output
// projection begin inside a 32-element block, so its shard is those columns
// dequantized to f32.
// RANK1: tfm.param @blk.0.attn_output.weight.rank1 : tensor<32x16xf32> storage <f32> sliced @blk.0.attn_output.weight axis 1 from 16
// RANK1-LABEL: func.func @forward
// RANK0: tfm.param @blk.0.attn_output.weight.rank0 : tensor<32x16xf32> storage <f32> sliced @blk.0.attn_output.weight axis 1 from 0
// RANK0-LABEL: func.func @forward
tfm.param @token_embd.weight : tensor<6x32xf32> storage <f32>
tfm.param @blk.0.attn_q.weight : tensor<32x32xf32> storage <f32>
tfm.param @blk.0.attn_k.weight : tensor<16x32xf32> storage <f32>
tfm.param @blk.0.attn_v.weight : tensor<16x32xf32> storage <f32>
tfm.param @blk.0.attn_output.weight : tensor<32x32xf32> storage <q8_0>
func.func @forward(%tokens: tensor<?xi32>, %positions: tensor<?xi32>) -> tensor<?x6xf32> {
  %embed = tfm.weight @token_embd.weight : tensor<6x32xf32>
  %x = tfm.embedding %embed, %tokens : (tensor<6x32xf32>, tensor<?xi32>) -> tensor<?x32xf32>
  %wq = tfm.weight @blk.0.attn_q.weight : tensor<32x32xf32>
  %q = tfm.linear %x, %wq : (tensor<?x32xf32>, tensor<32x32xf32>) -> tensor<?x32xf32>
  %wk = tfm.weight @blk.0.attn_k.weight : tensor<16x32xf32>
  %k = tfm.linear %x, %wk : (tensor<?x32xf32>, tensor<16x32xf32>) -> tensor<?x16xf32>
  %wv = tfm.weight @blk.0.attn_v.weight : tensor<16x32xf32>
  %v = tfm.linear %x, %wv : (tensor<?x32xf32>, tensor<16x32xf32>) -> tensor<?x16xf32>
  %qh = tfm.reshape %q : (tensor<?x32xf32>) -> tensor<?x4x8xf32>
  %kh = tfm.reshape %k : (tensor<?x16xf32>) -> tensor<?x2x8xf32>
  %vh = tfm.reshape %v : (tensor<?x16xf32>) -> tensor<?x2x8xf32>
  %att = tfm.attention %qh, %kh, %vh {causal, scale = 0.35 : f32} : (tensor<?x4x8xf32>, tensor<?x2x8xf32>, tensor<?x2x8xf32>) -> tensor<?x4x8xf32>
  %flat = tfm.reshape %att : (tensor<?x4x8xf32>) -> tensor<?x32xf32>
  %wo = tfm.weight @blk.0.attn_output.weight : tensor<32x32xf32>
  %o = tfm.linear %flat, %wo : (tensor<?x32xf32>, tensor<32x32xf32>) -> tensor<?x32xf32>
  %x1 = tfm.add %x, %o : tensor<?x32xf32>
  %logits = tfm.linear %x1, %embed : (tensor<?x32xf32>, tensor<6x32xf32>) -> tensor<?x6xf32>
  return %logits : tensor<?x6xf32>
}

// -----

// Q, K and V fused in the checkpoint (Phi-3's attn_qkv) and split by views:
// the rank's weight joins its rows of each part, and each view reads its
// columns of the smaller result.
// RANK1: tfm.param @blk.0.attn_qkv.weight.rank1 : tensor<8x8xf32> storage <f32> concat [@blk.0.attn_qkv.weight.rank1.part0, @blk.0.attn_qkv.weight.rank1.part1, @blk.0.attn_qkv.weight.rank1.part2]
// RANK1-DAG: tfm.param @blk.0.attn_qkv.weight.rank1.part0 : tensor<4x8xf32> storage <f32> sliced @blk.0.attn_qkv.weight axis 0 from 4
// RANK1-DAG: tfm.param @blk.0.attn_qkv.weight.rank1.part1 : tensor<2x8xf32> storage <f32> sliced @blk.0.attn_qkv.weight axis 0 from 10
// RANK1-DAG: tfm.param @blk.0.attn_qkv.weight.rank1.part2 : tensor<2x8xf32> storage <f32> sliced @blk.0.attn_qkv.weight axis 0 from 14
// RANK1-LABEL: func.func @forward
// RANK1: %[[QKV:.*]] = tfm.linear %{{.*}}, %{{.*}} : (tensor<?x8xf32>, tensor<8x8xf32>) -> tensor<?x8xf32>
// RANK1-NEXT: tfm.slice_columns %[[QKV]] {offset = 0 : i64, size = 4 : i64} : (tensor<?x8xf32>) -> tensor<?x4xf32>
// RANK1-NEXT: tfm.slice_columns %[[QKV]] {offset = 4 : i64, size = 2 : i64} : (tensor<?x8xf32>) -> tensor<?x2xf32>
// RANK1-NEXT: tfm.slice_columns %[[QKV]] {offset = 6 : i64, size = 2 : i64} : (tensor<?x8xf32>) -> tensor<?x2xf32>
// RANK0-LABEL: func.func @forward
// RANK0: tfm.linear %{{.*}}, %{{.*}} : (tensor<?x8xf32>, tensor<8x8xf32>) -> tensor<?x8xf32>
tfm.param @token_embd.weight : tensor<6x8xf32> storage <f32>
tfm.param @blk.0.attn_norm.weight : tensor<8xf32> storage <f32>
tfm.param @blk.0.attn_qkv.weight : tensor<16x8xf32> storage <f32>
tfm.param @blk.0.attn_output.weight : tensor<8x8xf32> storage <f32>
tfm.param @blk.0.attn_output.bias : tensor<8xf32> storage <f32>
tfm.param @blk.0.ffn_norm.weight : tensor<8xf32> storage <f32>
tfm.param @blk.0.ffn_gate.weight : tensor<16x8xf32> storage <f32>
tfm.param @blk.0.ffn_up.weight : tensor<16x8xf32> storage <f32>
tfm.param @blk.0.ffn_down.weight : tensor<8x16xf32> storage <f32>
tfm.param @output_norm.weight : tensor<8xf32> storage <f32>
func.func @forward(%tokens: tensor<?xi32>, %positions: tensor<?xi32>) -> tensor<?x6xf32> {
  %embed = tfm.weight @token_embd.weight : tensor<6x8xf32>
  %x = tfm.embedding %embed, %tokens : (tensor<6x8xf32>, tensor<?xi32>) -> tensor<?x8xf32>
  %an = tfm.weight @blk.0.attn_norm.weight : tensor<8xf32>
  %h = tfm.rms_norm %x, %an {epsilon = 1.0e-5 : f32} : tensor<?x8xf32>, tensor<8xf32>
  %wqkv = tfm.weight @blk.0.attn_qkv.weight : tensor<16x8xf32>
  %qkv = tfm.linear %h, %wqkv : (tensor<?x8xf32>, tensor<16x8xf32>) -> tensor<?x16xf32>
  %q = tfm.slice_columns %qkv {offset = 0 : i64, size = 8 : i64} : (tensor<?x16xf32>) -> tensor<?x8xf32>
  %k = tfm.slice_columns %qkv {offset = 8 : i64, size = 4 : i64} : (tensor<?x16xf32>) -> tensor<?x4xf32>
  %v = tfm.slice_columns %qkv {offset = 12 : i64, size = 4 : i64} : (tensor<?x16xf32>) -> tensor<?x4xf32>
  %qh = tfm.reshape %q : (tensor<?x8xf32>) -> tensor<?x4x2xf32>
  %qr = tfm.rope %qh, %positions {style = #tfm.rope_style<neox>, theta = 1.0e4 : f32} : tensor<?x4x2xf32>, tensor<?xi32>
  %kh = tfm.reshape %k : (tensor<?x4xf32>) -> tensor<?x2x2xf32>
  %kr = tfm.rope %kh, %positions {style = #tfm.rope_style<neox>, theta = 1.0e4 : f32} : tensor<?x2x2xf32>, tensor<?xi32>
  %vh = tfm.reshape %v : (tensor<?x4xf32>) -> tensor<?x2x2xf32>
  %att = tfm.attention %qr, %kr, %vh {causal, scale = 0.7 : f32} : (tensor<?x4x2xf32>, tensor<?x2x2xf32>, tensor<?x2x2xf32>) -> tensor<?x4x2xf32>
  %flat = tfm.reshape %att : (tensor<?x4x2xf32>) -> tensor<?x8xf32>
  %wo = tfm.weight @blk.0.attn_output.weight : tensor<8x8xf32>
  %bo = tfm.weight @blk.0.attn_output.bias : tensor<8xf32>
  %o = tfm.linear %flat, %wo bias %bo : (tensor<?x8xf32>, tensor<8x8xf32>, tensor<8xf32>) -> tensor<?x8xf32>
  %x1 = tfm.add %x, %o : tensor<?x8xf32>
  %fn = tfm.weight @blk.0.ffn_norm.weight : tensor<8xf32>
  %h1 = tfm.rms_norm %x1, %fn {epsilon = 1.0e-5 : f32} : tensor<?x8xf32>, tensor<8xf32>
  %wg = tfm.weight @blk.0.ffn_gate.weight : tensor<16x8xf32>
  %g = tfm.linear %h1, %wg : (tensor<?x8xf32>, tensor<16x8xf32>) -> tensor<?x16xf32>
  %wu = tfm.weight @blk.0.ffn_up.weight : tensor<16x8xf32>
  %u = tfm.linear %h1, %wu : (tensor<?x8xf32>, tensor<16x8xf32>) -> tensor<?x16xf32>
  %s = tfm.silu %g : tensor<?x16xf32>
  %m = tfm.mul %s, %u : tensor<?x16xf32>
  %wd = tfm.weight @blk.0.ffn_down.weight : tensor<8x16xf32>
  %d = tfm.linear %m, %wd : (tensor<?x16xf32>, tensor<8x16xf32>) -> tensor<?x8xf32>
  %x2 = tfm.add %x1, %d : tensor<?x8xf32>
  %on = tfm.weight @output_norm.weight : tensor<8xf32>
  %h2 = tfm.rms_norm %x2, %on {epsilon = 1.0e-5 : f32} : tensor<?x8xf32>, tensor<8xf32>
  %logits = tfm.linear %h2, %embed : (tensor<?x8xf32>, tensor<6x8xf32>) -> tensor<?x6xf32>
  %capped = tfm.scale %logits, 0.5 : tensor<?x6xf32>
  return %capped : tensor<?x6xf32>
}
