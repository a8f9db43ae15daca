// RUN: kvjit-opt %s --fuse-elementwise --split-input-file | FileCheck %s

// A Llama MLP between two residual adds: each residual add fuses with the norm
// that reads it (yielding the sum for the next residual), silu(gate)·up
// becomes swiglu, and the linears stay outside as GEMM calls.
// CHECK-LABEL: func.func @llama_mlp
// CHECK-SAME: (%[[X:.*]]: tensor<?x8xf32>, %[[ATTN:.*]]: tensor<?x8xf32>, %[[NORM_W:.*]]: tensor<8xf32>, %[[GATE_W:.*]]: tensor<16x8xf32>, %[[UP_W:.*]]: tensor<16x8xf32>, %[[DOWN_W:.*]]: tensor<8x16xf32>, %[[NEXT_W:.*]]: tensor<8xf32>)
// CHECK: %[[RES1:.*]]:2 = kernel.fusion row_wise(%[[X]], %[[ATTN]], %[[NORM_W]])
// CHECK-NEXT: ^bb0(%[[A:.*]]: tensor<?x8xf32>, %[[B:.*]]: tensor<?x8xf32>, %[[W:.*]]: tensor<8xf32>):
// CHECK-NEXT: %[[SUM:.*]] = tfm.add %[[A]], %[[B]]
// CHECK-NEXT: %[[NORMED:.*]] = tfm.rms_norm %[[SUM]], %[[W]]
// CHECK-NEXT: kernel.yield %[[SUM]], %[[NORMED]]
// CHECK-NEXT: }
// CHECK-NEXT: %[[GATE:.*]] = tfm.linear %[[RES1]]#1, %[[GATE_W]]
// CHECK-NEXT: %[[UP:.*]] = tfm.linear %[[RES1]]#1, %[[UP_W]]
// CHECK-NEXT: %[[GATED:.*]] = kernel.fusion swiglu(%[[GATE]], %[[UP]])
// CHECK-NEXT: ^bb0(%[[G:.*]]: tensor<?x16xf32>, %[[U:.*]]: tensor<?x16xf32>):
// CHECK-NEXT: %[[ACT:.*]] = tfm.silu %[[G]]
// CHECK-NEXT: %[[PRODUCT:.*]] = tfm.mul %[[ACT]], %[[U]]
// CHECK-NEXT: kernel.yield %[[PRODUCT]]
// CHECK-NEXT: }
// CHECK-NEXT: %[[DOWN:.*]] = tfm.linear %[[GATED]], %[[DOWN_W]]
// CHECK-NEXT: %[[RES2:.*]]:2 = kernel.fusion row_wise(%[[RES1]]#0, %[[DOWN]], %[[NEXT_W]])
// CHECK: return %[[RES2]]#0, %[[RES2]]#1
func.func @llama_mlp(%x: tensor<?x8xf32>, %attn: tensor<?x8xf32>, %norm_w: tensor<8xf32>,
                     %gate_w: tensor<16x8xf32>, %up_w: tensor<16x8xf32>, %down_w: tensor<8x16xf32>,
                     %next_w: tensor<8xf32>) -> (tensor<?x8xf32>, tensor<?x8xf32>) {
  %x1 = tfm.add %x, %attn : tensor<?x8xf32>
  %h = tfm.rms_norm %x1, %norm_w {epsilon = 1.0e-05 : f32} : tensor<?x8xf32>, tensor<8xf32>
  %gate = tfm.linear %h, %gate_w : (tensor<?x8xf32>, tensor<16x8xf32>) -> tensor<?x16xf32>
  %up = tfm.linear %h, %up_w : (tensor<?x8xf32>, tensor<16x8xf32>) -> tensor<?x16xf32>
  %act = tfm.silu %gate : tensor<?x16xf32>
  %gated = tfm.mul %act, %up : tensor<?x16xf32>
  %down = tfm.linear %gated, %down_w : (tensor<?x16xf32>, tensor<8x16xf32>) -> tensor<?x8xf32>
  %x2 = tfm.add %x1, %down : tensor<?x8xf32>
  %h2 = tfm.rms_norm %x2, %next_w {epsilon = 1.0e-05 : f32} : tensor<?x8xf32>, tensor<8xf32>
  return %x2, %h2 : tensor<?x8xf32>, tensor<?x8xf32>
}

// -----

// The norm's weight is read between the add and the norm, as the frontend
// emits it: the fusion goes where the norm was, after the weight. The last
// layer's sum has no other reader but is still yielded (the template's shape).
// CHECK-LABEL: func.func @weight_read_between
// CHECK: %[[W:.*]] = tfm.weight @norm
// CHECK-NEXT: %[[FUSED:.*]]:2 = kernel.fusion row_wise(%{{.*}}, %{{.*}}, %[[W]])
// CHECK: return %[[FUSED]]#1
tfm.param @norm : tensor<8xf32> storage <f32>
func.func @weight_read_between(%x: tensor<?x8xf32>, %delta: tensor<?x8xf32>) -> tensor<?x8xf32> {
  %sum = tfm.add %x, %delta : tensor<?x8xf32>
  %w = tfm.weight @norm : tensor<8xf32>
  %normed = tfm.rms_norm %sum, %w {epsilon = 1.0e-05 : f32} : tensor<?x8xf32>, tensor<8xf32>
  return %normed : tensor<?x8xf32>
}

// -----

// q and k get one rope kernel each (their head counts differ under GQA); the
// first layer's norm reads the embedding, not a sum, and runs alone.
// CHECK-LABEL: func.func @rope_and_first_norm
// CHECK: %[[H:.*]] = kernel.fusion row_wise(%{{.*}}, %{{.*}}) : (tensor<?x8xf32>, tensor<8xf32>) -> tensor<?x8xf32>
// CHECK: %[[Q:.*]] = tfm.reshape %[[H]]
// CHECK-NEXT: %[[QR:.*]] = kernel.fusion row_wise(%[[Q]], %[[POS:.*]]) : (tensor<?x2x4xf32>, tensor<?xi32>) -> tensor<?x2x4xf32>
// CHECK: %[[K:.*]] = tfm.reshape %{{.*}} : (tensor<?x4xf32>) -> tensor<?x1x4xf32>
// CHECK-NEXT: %[[KR:.*]] = kernel.fusion row_wise(%[[K]], %[[POS]]) : (tensor<?x1x4xf32>, tensor<?xi32>) -> tensor<?x1x4xf32>
// CHECK: return %[[QR]], %[[KR]]
func.func @rope_and_first_norm(%x: tensor<?x8xf32>, %w: tensor<8xf32>, %k_flat: tensor<?x4xf32>,
                               %positions: tensor<?xi32>) -> (tensor<?x2x4xf32>, tensor<?x1x4xf32>) {
  %h = tfm.rms_norm %x, %w {epsilon = 1.0e-05 : f32} : tensor<?x8xf32>, tensor<8xf32>
  %q = tfm.reshape %h : (tensor<?x8xf32>) -> tensor<?x2x4xf32>
  %q_rot = tfm.rope %q, %positions {style = #tfm.rope_style<neox>, theta = 1.0e+04 : f32}
      : tensor<?x2x4xf32>, tensor<?xi32>
  %k = tfm.reshape %k_flat : (tensor<?x4xf32>) -> tensor<?x1x4xf32>
  %k_rot = tfm.rope %k, %positions {style = #tfm.rope_style<neox>, theta = 1.0e+04 : f32}
      : tensor<?x1x4xf32>, tensor<?xi32>
  return %q_rot, %k_rot : tensor<?x2x4xf32>, tensor<?x1x4xf32>
}

// -----

// A tree of single-use elementwise ops is one kernel that yields its root;
// the operands it reads twice or more come in once.
// CHECK-LABEL: func.func @elementwise_tree
// CHECK-SAME: (%[[A:.*]]: tensor<?x8xf32>, %[[B:.*]]: tensor<?x8xf32>)
// CHECK-NEXT: %[[OUT:.*]] = kernel.fusion elementwise(%[[A]], %[[B]]) : (tensor<?x8xf32>, tensor<?x8xf32>) -> tensor<?x8xf32>
// CHECK-NEXT: ^bb0(%[[IA:.*]]: tensor<?x8xf32>, %[[IB:.*]]: tensor<?x8xf32>):
// CHECK-NEXT: %[[S:.*]] = tfm.scale %[[IA]], 5.000000e-01
// CHECK-NEXT: %[[G:.*]] = tfm.gelu %[[IB]]
// CHECK-NEXT: %[[M:.*]] = tfm.mul %[[S]], %[[G]]
// CHECK-NEXT: %[[R:.*]] = tfm.add %[[M]], %[[IA]]
// CHECK-NEXT: kernel.yield %[[R]]
// CHECK-NEXT: }
// CHECK-NEXT: return %[[OUT]]
func.func @elementwise_tree(%a: tensor<?x8xf32>, %b: tensor<?x8xf32>) -> tensor<?x8xf32> {
  %s = tfm.scale %a, 5.000000e-01 : tensor<?x8xf32>
  %g = tfm.gelu %b : tensor<?x8xf32>
  %m = tfm.mul %s, %g : tensor<?x8xf32>
  %r = tfm.add %m, %a : tensor<?x8xf32>
  return %r : tensor<?x8xf32>
}

// -----

// Naive attention (before fuse-attention): the scale and the causal mask
// fuse; the matmuls, transposes and softmax stay outside.
// CHECK-LABEL: func.func @attention_scores
// CHECK: %[[SCORES:.*]] = tfm.matmul
// CHECK-NEXT: %[[MASKED:.*]] = kernel.fusion elementwise(%[[SCORES]]) : (tensor<2x?x?xf32>) -> tensor<2x?x?xf32>
// CHECK-NEXT: ^bb0
// CHECK-NEXT: tfm.scale
// CHECK-NEXT: tfm.causal_mask
// CHECK-NEXT: kernel.yield
// CHECK-NEXT: }
// CHECK-NEXT: %[[PROBS:.*]] = tfm.softmax %[[MASKED]]
// CHECK-NEXT: tfm.matmul %[[PROBS]]
func.func @attention_scores(%q: tensor<2x?x4xf32>, %kt: tensor<2x4x?xf32>, %v: tensor<2x?x4xf32>)
    -> tensor<2x?x4xf32> {
  %scores = tfm.matmul %q, %kt : (tensor<2x?x4xf32>, tensor<2x4x?xf32>) -> tensor<2x?x?xf32>
  %scaled = tfm.scale %scores, 5.000000e-01 : tensor<2x?x?xf32>
  %masked = tfm.causal_mask %scaled : tensor<2x?x?xf32>
  %probs = tfm.softmax %masked {axis = -1 : i64} : tensor<2x?x?xf32>
  %context = tfm.matmul %probs, %v : (tensor<2x?x?xf32>, tensor<2x?x4xf32>) -> tensor<2x?x4xf32>
  return %context : tensor<2x?x4xf32>
}

// -----

// Must not fuse across a value with two readers: its producer is a kernel of
// its own, whose result the readers' kernel takes as an operand.
// CHECK-LABEL: func.func @shared_value_ends_a_chain
// CHECK: %[[SHARED:.*]] = kernel.fusion elementwise(%{{.*}}) : (tensor<?x8xf32>) -> tensor<?x8xf32>
// CHECK-NEXT: ^bb0
// CHECK-NEXT: tfm.silu
// CHECK-NEXT: kernel.yield
// CHECK-NEXT: }
// CHECK-NEXT: %[[OUT:.*]] = kernel.fusion elementwise(%[[SHARED]]) : (tensor<?x8xf32>) -> tensor<?x8xf32>
// CHECK-NEXT: ^bb0(%[[S:.*]]: tensor<?x8xf32>):
// CHECK-NEXT: %[[FIRST:.*]] = tfm.scale %[[S]]
// CHECK-NEXT: %[[SECOND:.*]] = tfm.add %[[S]], %[[FIRST]]
// CHECK-NEXT: kernel.yield %[[SECOND]]
// CHECK-NEXT: }
// CHECK-NEXT: return %[[OUT]]
func.func @shared_value_ends_a_chain(%x: tensor<?x8xf32>) -> tensor<?x8xf32> {
  %shared = tfm.silu %x : tensor<?x8xf32>
  %first = tfm.scale %shared, 2.000000e+00 : tensor<?x8xf32>
  %second = tfm.add %shared, %first : tensor<?x8xf32>
  return %second : tensor<?x8xf32>
}

// -----

// Must not fuse through a GEMM: the linear splits the chain in two kernels.
// CHECK-LABEL: func.func @linear_splits_a_chain
// CHECK: kernel.fusion elementwise
// CHECK: tfm.gelu
// CHECK: kernel.yield
// CHECK: tfm.linear
// CHECK-NEXT: kernel.fusion elementwise
// CHECK: tfm.scale
// CHECK: kernel.yield
func.func @linear_splits_a_chain(%x: tensor<?x8xf32>, %w: tensor<8x8xf32>) -> tensor<?x8xf32> {
  %a = tfm.gelu %x {approximate_tanh} : tensor<?x8xf32>
  %y = tfm.linear %a, %w : (tensor<?x8xf32>, tensor<8x8xf32>) -> tensor<?x8xf32>
  %z = tfm.scale %y, 3.000000e+00 : tensor<?x8xf32>
  return %z : tensor<?x8xf32>
}

// -----

// Must not make swiglu of a silu that is read elsewhere too: the silu is a
// kernel of its own and the product an elementwise one.
// CHECK-LABEL: func.func @silu_read_twice
// CHECK-NOT: swiglu
// CHECK: %[[ACT:.*]] = kernel.fusion elementwise(%{{.*}})
// CHECK-NEXT: ^bb0
// CHECK-NEXT: tfm.silu
// CHECK: kernel.fusion elementwise(%[[ACT]], %{{.*}})
// CHECK-NEXT: ^bb0
// CHECK-NEXT: tfm.mul
// CHECK-NOT: swiglu
func.func @silu_read_twice(%gate: tensor<?x8xf32>, %up: tensor<?x8xf32>)
    -> (tensor<?x8xf32>, tensor<?x8xf32>) {
  %act = tfm.silu %gate : tensor<?x8xf32>
  %product = tfm.mul %act, %up : tensor<?x8xf32>
  return %product, %act : tensor<?x8xf32>, tensor<?x8xf32>
}

// -----

// Must not fuse an add with its norm when the sum is read before the norm's
// weight is: no place in the block suits one kernel for both. The add and the
// norm run apart.
// CHECK-LABEL: func.func @sum_read_before_norm
// CHECK-NOT: :2 = kernel.fusion row_wise
// CHECK: %[[SUM:.*]] = kernel.fusion elementwise(%{{.*}}, %{{.*}})
// CHECK-NEXT: ^bb0
// CHECK-NEXT: tfm.add
// CHECK: %[[EARLY:.*]] = tfm.linear %[[SUM]]
// CHECK-NEXT: %[[W:.*]] = tfm.weight @norm
// CHECK-NEXT: kernel.fusion row_wise(%[[SUM]], %[[W]])
// CHECK-NOT: :2 = kernel.fusion row_wise
tfm.param @norm : tensor<8xf32> storage <f32>
func.func @sum_read_before_norm(%x: tensor<?x8xf32>, %delta: tensor<?x8xf32>, %w: tensor<8x8xf32>)
    -> (tensor<?x8xf32>, tensor<?x8xf32>) {
  %sum = tfm.add %x, %delta : tensor<?x8xf32>
  %early = tfm.linear %sum, %w : (tensor<?x8xf32>, tensor<8x8xf32>) -> tensor<?x8xf32>
  %norm_w = tfm.weight @norm : tensor<8xf32>
  %normed = tfm.rms_norm %sum, %norm_w {epsilon = 1.0e-05 : f32} : tensor<?x8xf32>, tensor<8xf32>
  return %normed, %early : tensor<?x8xf32>, tensor<?x8xf32>
}

// -----

// tfm.layer_norm is row-wise but does not fuse a residual add: the add runs
// as an elementwise fusion and the norm alone, on the sum.
// CHECK-LABEL: func.func @layer_norm_keeps_its_add_apart
// CHECK: %[[SUM:.*]] = kernel.fusion elementwise(%{{.*}}, %{{.*}})
// CHECK: kernel.fusion row_wise(%[[SUM]], %{{.*}}) : (tensor<?x8xf32>, tensor<8xf32>) -> tensor<?x8xf32>
// CHECK-NEXT: ^bb0
// CHECK-NEXT: tfm.layer_norm
// CHECK-NOT: :2 = kernel.fusion row_wise
func.func @layer_norm_keeps_its_add_apart(%x: tensor<?x8xf32>, %delta: tensor<?x8xf32>,
                                          %w: tensor<8xf32>) -> tensor<?x8xf32> {
  %sum = tfm.add %x, %delta : tensor<?x8xf32>
  %normed = tfm.layer_norm %sum, %w {epsilon = 1.0e-05 : f32} : tensor<?x8xf32>, tensor<8xf32>
  return %normed : tensor<?x8xf32>
}

// -----

// One sum read by two norms: the first norm takes the add, the second runs
// alone on the fused sum.
// CHECK-LABEL: func.func @sum_read_by_two_norms
// CHECK: %[[FIRST:.*]]:2 = kernel.fusion row_wise
// CHECK: kernel.fusion row_wise(%[[FIRST]]#0, %{{.*}})
func.func @sum_read_by_two_norms(%x: tensor<?x8xf32>, %delta: tensor<?x8xf32>, %w: tensor<8xf32>)
    -> (tensor<?x8xf32>, tensor<?x8xf32>) {
  %sum = tfm.add %x, %delta : tensor<?x8xf32>
  %a = tfm.rms_norm %sum, %w {epsilon = 1.0e-05 : f32} : tensor<?x8xf32>, tensor<8xf32>
  %b = tfm.rms_norm %sum, %w {epsilon = 1.0e-06 : f32} : tensor<?x8xf32>, tensor<8xf32>
  return %a, %b : tensor<?x8xf32>, tensor<?x8xf32>
}

// -----

// Already-fused IR is left as it is: the pass does not look inside fusions,
// so running it twice changes nothing.
// CHECK-LABEL: func.func @already_fused
// CHECK-NEXT: %[[OUT:.*]] = kernel.fusion swiglu(%{{.*}}, %{{.*}})
// CHECK-NEXT: ^bb0
// CHECK-NEXT: tfm.silu
// CHECK-NEXT: tfm.mul
// CHECK-NEXT: kernel.yield
// CHECK-NEXT: }
// CHECK-NEXT: return %[[OUT]]
func.func @already_fused(%gate: tensor<?x8xf32>, %up: tensor<?x8xf32>) -> tensor<?x8xf32> {
  %out = kernel.fusion swiglu(%gate, %up) : (tensor<?x8xf32>, tensor<?x8xf32>) -> tensor<?x8xf32> {
  ^bb0(%g: tensor<?x8xf32>, %u: tensor<?x8xf32>):
    %act = tfm.silu %g : tensor<?x8xf32>
    %p = tfm.mul %act, %u : tensor<?x8xf32>
    kernel.yield %p : tensor<?x8xf32>
  }
  return %out : tensor<?x8xf32>
}
