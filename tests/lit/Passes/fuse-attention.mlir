// RUN: kvjit-opt %s --fuse-attention --split-input-file | FileCheck %s

// Multi-head attention as the frontend writes it: one tfm.attention on the
// token-major operands, the whole chain gone.
// CHECK-LABEL: func.func @mha
// CHECK-SAME: (%[[Q:[a-z0-9]+]]: tensor<?x4x8xf32>, %[[K:[a-z0-9]+]]: tensor<?x4x8xf32>, %[[V:[a-z0-9]+]]: tensor<?x4x8xf32>)
// CHECK-NEXT: %[[O:.*]] = tfm.attention %[[Q]], %[[K]], %[[V]] {causal, scale = 0.353553385 : f32} : (tensor<?x4x8xf32>, tensor<?x4x8xf32>, tensor<?x4x8xf32>) -> tensor<?x4x8xf32>
// CHECK-NEXT: return %[[O]]
func.func @mha(%q: tensor<?x4x8xf32>, %k: tensor<?x4x8xf32>, %v: tensor<?x4x8xf32>) -> tensor<?x4x8xf32> {
  %qh = tfm.transpose %q [1, 0, 2] : (tensor<?x4x8xf32>) -> tensor<4x?x8xf32>
  %kt = tfm.transpose %k [1, 2, 0] : (tensor<?x4x8xf32>) -> tensor<4x8x?xf32>
  %vh = tfm.transpose %v [1, 0, 2] : (tensor<?x4x8xf32>) -> tensor<4x?x8xf32>
  %scores = tfm.matmul %qh, %kt : (tensor<4x?x8xf32>, tensor<4x8x?xf32>) -> tensor<4x?x?xf32>
  %scaled = tfm.scale %scores, 0.353553385 : tensor<4x?x?xf32>
  %masked = tfm.causal_mask %scaled : tensor<4x?x?xf32>
  %p = tfm.softmax %masked {axis = -1 : i64} : tensor<4x?x?xf32>
  %ctx = tfm.matmul %p, %vh : (tensor<4x?x?xf32>, tensor<4x?x8xf32>) -> tensor<4x?x8xf32>
  %out = tfm.transpose %ctx [1, 0, 2] : (tensor<4x?x8xf32>) -> tensor<?x4x8xf32>
  return %out : tensor<?x4x8xf32>
}

// -----

// Grouped-query attention: K and V repeated alike on the head axis; the fused
// op reads the 2 shared KV heads directly.
// CHECK-LABEL: func.func @gqa
// CHECK-SAME: (%[[Q:[a-z0-9]+]]: tensor<?x8x8xf32>, %[[K:[a-z0-9]+]]: tensor<?x2x8xf32>, %[[V:[a-z0-9]+]]: tensor<?x2x8xf32>)
// CHECK-NOT: tfm.repeat
// CHECK: tfm.attention %[[Q]], %[[K]], %[[V]] {causal, scale = 0.353553385 : f32} : (tensor<?x8x8xf32>, tensor<?x2x8xf32>, tensor<?x2x8xf32>) -> tensor<?x8x8xf32>
// CHECK-NOT: tfm.transpose
// CHECK-NOT: tfm.softmax
func.func @gqa(%q: tensor<?x8x8xf32>, %k: tensor<?x2x8xf32>, %v: tensor<?x2x8xf32>) -> tensor<?x8x8xf32> {
  %k8 = tfm.repeat %k {axis = 1 : i64, repeats = 4 : i64} : (tensor<?x2x8xf32>) -> tensor<?x8x8xf32>
  %v8 = tfm.repeat %v {axis = 1 : i64, repeats = 4 : i64} : (tensor<?x2x8xf32>) -> tensor<?x8x8xf32>
  %qh = tfm.transpose %q [1, 0, 2] : (tensor<?x8x8xf32>) -> tensor<8x?x8xf32>
  %kt = tfm.transpose %k8 [1, 2, 0] : (tensor<?x8x8xf32>) -> tensor<8x8x?xf32>
  %vh = tfm.transpose %v8 [1, 0, 2] : (tensor<?x8x8xf32>) -> tensor<8x?x8xf32>
  %scores = tfm.matmul %qh, %kt : (tensor<8x?x8xf32>, tensor<8x8x?xf32>) -> tensor<8x?x?xf32>
  %scaled = tfm.scale %scores, 0.353553385 : tensor<8x?x?xf32>
  %masked = tfm.causal_mask %scaled : tensor<8x?x?xf32>
  %p = tfm.softmax %masked {axis = -1 : i64} : tensor<8x?x?xf32>
  %ctx = tfm.matmul %p, %vh : (tensor<8x?x?xf32>, tensor<8x?x8xf32>) -> tensor<8x?x8xf32>
  %out = tfm.transpose %ctx [1, 0, 2] : (tensor<8x?x8xf32>) -> tensor<?x8x8xf32>
  return %out : tensor<?x8x8xf32>
}

// -----

// No mask: not causal. Softmax named by its positive last axis.
// CHECK-LABEL: func.func @unmasked
// CHECK: tfm.attention %{{.*}}, %{{.*}}, %{{.*}} {scale = 1.250000e-01 : f32}
// CHECK-NOT: causal
// CHECK-NOT: tfm.softmax
func.func @unmasked(%q: tensor<?x4x8xf32>, %k: tensor<?x4x8xf32>, %v: tensor<?x4x8xf32>) -> tensor<?x4x8xf32> {
  %qh = tfm.transpose %q [1, 0, 2] : (tensor<?x4x8xf32>) -> tensor<4x?x8xf32>
  %kt = tfm.transpose %k [1, 2, 0] : (tensor<?x4x8xf32>) -> tensor<4x8x?xf32>
  %vh = tfm.transpose %v [1, 0, 2] : (tensor<?x4x8xf32>) -> tensor<4x?x8xf32>
  %scores = tfm.matmul %qh, %kt : (tensor<4x?x8xf32>, tensor<4x8x?xf32>) -> tensor<4x?x?xf32>
  %scaled = tfm.scale %scores, 0.125 : tensor<4x?x?xf32>
  %p = tfm.softmax %scaled {axis = 2 : i64} : tensor<4x?x?xf32>
  %ctx = tfm.matmul %p, %vh : (tensor<4x?x?xf32>, tensor<4x?x8xf32>) -> tensor<4x?x8xf32>
  %out = tfm.transpose %ctx [1, 0, 2] : (tensor<4x?x8xf32>) -> tensor<?x4x8xf32>
  return %out : tensor<?x4x8xf32>
}

// -----

// No tfm.scale between the product and the mask: scale 1.
// CHECK-LABEL: func.func @unscaled
// CHECK: tfm.attention %{{.*}}, %{{.*}}, %{{.*}} {causal, scale = 1.000000e+00 : f32}
// CHECK-NOT: tfm.softmax
func.func @unscaled(%q: tensor<?x4x8xf32>, %k: tensor<?x4x8xf32>, %v: tensor<?x4x8xf32>) -> tensor<?x4x8xf32> {
  %qh = tfm.transpose %q [1, 0, 2] : (tensor<?x4x8xf32>) -> tensor<4x?x8xf32>
  %kt = tfm.transpose %k [1, 2, 0] : (tensor<?x4x8xf32>) -> tensor<4x8x?xf32>
  %vh = tfm.transpose %v [1, 0, 2] : (tensor<?x4x8xf32>) -> tensor<4x?x8xf32>
  %scores = tfm.matmul %qh, %kt : (tensor<4x?x8xf32>, tensor<4x8x?xf32>) -> tensor<4x?x?xf32>
  %masked = tfm.causal_mask %scores : tensor<4x?x?xf32>
  %p = tfm.softmax %masked {axis = -1 : i64} : tensor<4x?x?xf32>
  %ctx = tfm.matmul %p, %vh : (tensor<4x?x?xf32>, tensor<4x?x8xf32>) -> tensor<4x?x8xf32>
  %out = tfm.transpose %ctx [1, 0, 2] : (tensor<4x?x8xf32>) -> tensor<?x4x8xf32>
  return %out : tensor<?x4x8xf32>
}

// -----

// A repetition on another axis is not head sharing: the fused op reads the
// repeated tensors as they are.
// CHECK-LABEL: func.func @repeat_on_head_dim
// CHECK: %[[K8:.*]] = tfm.repeat %{{.*}} {axis = 2 : i64, repeats = 2 : i64}
// CHECK: %[[V8:.*]] = tfm.repeat %{{.*}} {axis = 2 : i64, repeats = 2 : i64}
// CHECK: tfm.attention %{{.*}}, %[[K8]], %[[V8]] {causal, scale = 0.353553385 : f32} : (tensor<?x4x8xf32>, tensor<?x4x8xf32>, tensor<?x4x8xf32>) -> tensor<?x4x8xf32>
func.func @repeat_on_head_dim(%q: tensor<?x4x8xf32>, %k: tensor<?x4x4xf32>, %v: tensor<?x4x4xf32>) -> tensor<?x4x8xf32> {
  %k8 = tfm.repeat %k {axis = 2 : i64, repeats = 2 : i64} : (tensor<?x4x4xf32>) -> tensor<?x4x8xf32>
  %v8 = tfm.repeat %v {axis = 2 : i64, repeats = 2 : i64} : (tensor<?x4x4xf32>) -> tensor<?x4x8xf32>
  %qh = tfm.transpose %q [1, 0, 2] : (tensor<?x4x8xf32>) -> tensor<4x?x8xf32>
  %kt = tfm.transpose %k8 [1, 2, 0] : (tensor<?x4x8xf32>) -> tensor<4x8x?xf32>
  %vh = tfm.transpose %v8 [1, 0, 2] : (tensor<?x4x8xf32>) -> tensor<4x?x8xf32>
  %scores = tfm.matmul %qh, %kt : (tensor<4x?x8xf32>, tensor<4x8x?xf32>) -> tensor<4x?x?xf32>
  %scaled = tfm.scale %scores, 0.353553385 : tensor<4x?x?xf32>
  %masked = tfm.causal_mask %scaled : tensor<4x?x?xf32>
  %p = tfm.softmax %masked {axis = -1 : i64} : tensor<4x?x?xf32>
  %ctx = tfm.matmul %p, %vh : (tensor<4x?x?xf32>, tensor<4x?x8xf32>) -> tensor<4x?x8xf32>
  %out = tfm.transpose %ctx [1, 0, 2] : (tensor<4x?x8xf32>) -> tensor<?x4x8xf32>
  return %out : tensor<?x4x8xf32>
}

// -----

// Only K is repeated: nothing to share, so both stay at 4 heads.
// CHECK-LABEL: func.func @only_key_repeated
// CHECK-SAME: %[[V:[a-z0-9]+]]: tensor<?x4x8xf32>)
// CHECK: %[[K4:.*]] = tfm.repeat %{{.*}} {axis = 1 : i64, repeats = 2 : i64}
// CHECK: tfm.attention %{{.*}}, %[[K4]], %[[V]] {causal
func.func @only_key_repeated(%q: tensor<?x4x8xf32>, %k: tensor<?x2x8xf32>, %v: tensor<?x4x8xf32>) -> tensor<?x4x8xf32> {
  %k4 = tfm.repeat %k {axis = 1 : i64, repeats = 2 : i64} : (tensor<?x2x8xf32>) -> tensor<?x4x8xf32>
  %qh = tfm.transpose %q [1, 0, 2] : (tensor<?x4x8xf32>) -> tensor<4x?x8xf32>
  %kt = tfm.transpose %k4 [1, 2, 0] : (tensor<?x4x8xf32>) -> tensor<4x8x?xf32>
  %vh = tfm.transpose %v [1, 0, 2] : (tensor<?x4x8xf32>) -> tensor<4x?x8xf32>
  %scores = tfm.matmul %qh, %kt : (tensor<4x?x8xf32>, tensor<4x8x?xf32>) -> tensor<4x?x?xf32>
  %scaled = tfm.scale %scores, 0.353553385 : tensor<4x?x?xf32>
  %masked = tfm.causal_mask %scaled : tensor<4x?x?xf32>
  %p = tfm.softmax %masked {axis = -1 : i64} : tensor<4x?x?xf32>
  %ctx = tfm.matmul %p, %vh : (tensor<4x?x?xf32>, tensor<4x?x8xf32>) -> tensor<4x?x8xf32>
  %out = tfm.transpose %ctx [1, 0, 2] : (tensor<4x?x8xf32>) -> tensor<?x4x8xf32>
  return %out : tensor<?x4x8xf32>
}

// -----

// Softmax over the queries is not attention.
// CHECK-LABEL: func.func @softmax_over_queries
// CHECK-NOT: tfm.attention
// CHECK: tfm.softmax %{{.*}} {axis = 1 : i64}
func.func @softmax_over_queries(%q: tensor<?x4x8xf32>, %k: tensor<?x4x8xf32>, %v: tensor<?x4x8xf32>) -> tensor<?x4x8xf32> {
  %qh = tfm.transpose %q [1, 0, 2] : (tensor<?x4x8xf32>) -> tensor<4x?x8xf32>
  %kt = tfm.transpose %k [1, 2, 0] : (tensor<?x4x8xf32>) -> tensor<4x8x?xf32>
  %vh = tfm.transpose %v [1, 0, 2] : (tensor<?x4x8xf32>) -> tensor<4x?x8xf32>
  %scores = tfm.matmul %qh, %kt : (tensor<4x?x8xf32>, tensor<4x8x?xf32>) -> tensor<4x?x?xf32>
  %scaled = tfm.scale %scores, 0.353553385 : tensor<4x?x?xf32>
  %masked = tfm.causal_mask %scaled : tensor<4x?x?xf32>
  %p = tfm.softmax %masked {axis = 1 : i64} : tensor<4x?x?xf32>
  %ctx = tfm.matmul %p, %vh : (tensor<4x?x?xf32>, tensor<4x?x8xf32>) -> tensor<4x?x8xf32>
  %out = tfm.transpose %ctx [1, 0, 2] : (tensor<4x?x8xf32>) -> tensor<?x4x8xf32>
  return %out : tensor<?x4x8xf32>
}

// -----

// The probabilities are also returned: fusing would leave the chain alive.
// CHECK-LABEL: func.func @probabilities_used_elsewhere
// CHECK-NOT: tfm.attention
// CHECK: %[[P:.*]] = tfm.softmax
// CHECK: return %{{.*}}, %[[P]]
func.func @probabilities_used_elsewhere(%q: tensor<?x4x8xf32>, %k: tensor<?x4x8xf32>, %v: tensor<?x4x8xf32>) -> (tensor<?x4x8xf32>, tensor<4x?x?xf32>) {
  %qh = tfm.transpose %q [1, 0, 2] : (tensor<?x4x8xf32>) -> tensor<4x?x8xf32>
  %kt = tfm.transpose %k [1, 2, 0] : (tensor<?x4x8xf32>) -> tensor<4x8x?xf32>
  %vh = tfm.transpose %v [1, 0, 2] : (tensor<?x4x8xf32>) -> tensor<4x?x8xf32>
  %scores = tfm.matmul %qh, %kt : (tensor<4x?x8xf32>, tensor<4x8x?xf32>) -> tensor<4x?x?xf32>
  %scaled = tfm.scale %scores, 0.353553385 : tensor<4x?x?xf32>
  %masked = tfm.causal_mask %scaled : tensor<4x?x?xf32>
  %p = tfm.softmax %masked {axis = -1 : i64} : tensor<4x?x?xf32>
  %ctx = tfm.matmul %p, %vh : (tensor<4x?x?xf32>, tensor<4x?x8xf32>) -> tensor<4x?x8xf32>
  %out = tfm.transpose %ctx [1, 0, 2] : (tensor<4x?x8xf32>) -> tensor<?x4x8xf32>
  return %out, %p : tensor<?x4x8xf32>, tensor<4x?x?xf32>
}

// -----

// The transposed query is read twice.
// CHECK-LABEL: func.func @query_heads_used_elsewhere
// CHECK-NOT: tfm.attention
// CHECK: tfm.softmax
func.func @query_heads_used_elsewhere(%q: tensor<?x4x8xf32>, %k: tensor<?x4x8xf32>, %v: tensor<?x4x8xf32>) -> (tensor<?x4x8xf32>, tensor<4x?x8xf32>) {
  %qh = tfm.transpose %q [1, 0, 2] : (tensor<?x4x8xf32>) -> tensor<4x?x8xf32>
  %kt = tfm.transpose %k [1, 2, 0] : (tensor<?x4x8xf32>) -> tensor<4x8x?xf32>
  %vh = tfm.transpose %v [1, 0, 2] : (tensor<?x4x8xf32>) -> tensor<4x?x8xf32>
  %scores = tfm.matmul %qh, %kt : (tensor<4x?x8xf32>, tensor<4x8x?xf32>) -> tensor<4x?x?xf32>
  %scaled = tfm.scale %scores, 0.353553385 : tensor<4x?x?xf32>
  %masked = tfm.causal_mask %scaled : tensor<4x?x?xf32>
  %p = tfm.softmax %masked {axis = -1 : i64} : tensor<4x?x?xf32>
  %ctx = tfm.matmul %p, %vh : (tensor<4x?x?xf32>, tensor<4x?x8xf32>) -> tensor<4x?x8xf32>
  %out = tfm.transpose %ctx [1, 0, 2] : (tensor<4x?x8xf32>) -> tensor<?x4x8xf32>
  return %out, %qh : tensor<?x4x8xf32>, tensor<4x?x8xf32>
}

// -----

// K transposed [2, 1, 0] swaps heads with head_dim (they are both 4 here, so
// the graph is well typed, but it is not attention).
// CHECK-LABEL: func.func @key_permuted_otherwise
// CHECK-NOT: tfm.attention
// CHECK: tfm.transpose %{{.*}} [2, 1, 0]
// CHECK: tfm.softmax
func.func @key_permuted_otherwise(%q: tensor<?x4x4xf32>, %k: tensor<?x4x4xf32>, %v: tensor<?x4x4xf32>) -> tensor<?x4x4xf32> {
  %qh = tfm.transpose %q [1, 0, 2] : (tensor<?x4x4xf32>) -> tensor<4x?x4xf32>
  %kt = tfm.transpose %k [2, 1, 0] : (tensor<?x4x4xf32>) -> tensor<4x4x?xf32>
  %vh = tfm.transpose %v [1, 0, 2] : (tensor<?x4x4xf32>) -> tensor<4x?x4xf32>
  %scores = tfm.matmul %qh, %kt : (tensor<4x?x4xf32>, tensor<4x4x?xf32>) -> tensor<4x?x?xf32>
  %scaled = tfm.scale %scores, 0.5 : tensor<4x?x?xf32>
  %masked = tfm.causal_mask %scaled : tensor<4x?x?xf32>
  %p = tfm.softmax %masked {axis = -1 : i64} : tensor<4x?x?xf32>
  %ctx = tfm.matmul %p, %vh : (tensor<4x?x?xf32>, tensor<4x?x4xf32>) -> tensor<4x?x4xf32>
  %out = tfm.transpose %ctx [1, 0, 2] : (tensor<4x?x4xf32>) -> tensor<?x4x4xf32>
  return %out : tensor<?x4x4xf32>
}

// -----

// The result stays head-major: there is no transpose back to anchor on.
// CHECK-LABEL: func.func @head_major_result
// CHECK-NOT: tfm.attention
// CHECK: tfm.transpose %{{.*}} [1, 2, 0]
func.func @head_major_result(%q: tensor<?x4x8xf32>, %k: tensor<?x4x8xf32>, %v: tensor<?x4x8xf32>) -> tensor<?x8x4xf32> {
  %qh = tfm.transpose %q [1, 0, 2] : (tensor<?x4x8xf32>) -> tensor<4x?x8xf32>
  %kt = tfm.transpose %k [1, 2, 0] : (tensor<?x4x8xf32>) -> tensor<4x8x?xf32>
  %vh = tfm.transpose %v [1, 0, 2] : (tensor<?x4x8xf32>) -> tensor<4x?x8xf32>
  %scores = tfm.matmul %qh, %kt : (tensor<4x?x8xf32>, tensor<4x8x?xf32>) -> tensor<4x?x?xf32>
  %scaled = tfm.scale %scores, 0.353553385 : tensor<4x?x?xf32>
  %masked = tfm.causal_mask %scaled : tensor<4x?x?xf32>
  %p = tfm.softmax %masked {axis = -1 : i64} : tensor<4x?x?xf32>
  %ctx = tfm.matmul %p, %vh : (tensor<4x?x?xf32>, tensor<4x?x8xf32>) -> tensor<4x?x8xf32>
  %out = tfm.transpose %ctx [1, 2, 0] : (tensor<4x?x8xf32>) -> tensor<?x8x4xf32>
  return %out : tensor<?x8x4xf32>
}

// -----

// Masking before scaling multiplies -inf by the factor; not the fused order.
// CHECK-LABEL: func.func @mask_before_scale
// CHECK-NOT: tfm.attention
// CHECK: tfm.causal_mask
// CHECK-NEXT: tfm.scale
func.func @mask_before_scale(%q: tensor<?x4x8xf32>, %k: tensor<?x4x8xf32>, %v: tensor<?x4x8xf32>) -> tensor<?x4x8xf32> {
  %qh = tfm.transpose %q [1, 0, 2] : (tensor<?x4x8xf32>) -> tensor<4x?x8xf32>
  %kt = tfm.transpose %k [1, 2, 0] : (tensor<?x4x8xf32>) -> tensor<4x8x?xf32>
  %vh = tfm.transpose %v [1, 0, 2] : (tensor<?x4x8xf32>) -> tensor<4x?x8xf32>
  %scores = tfm.matmul %qh, %kt : (tensor<4x?x8xf32>, tensor<4x8x?xf32>) -> tensor<4x?x?xf32>
  %masked = tfm.causal_mask %scores : tensor<4x?x?xf32>
  %scaled = tfm.scale %masked, 0.353553385 : tensor<4x?x?xf32>
  %p = tfm.softmax %scaled {axis = -1 : i64} : tensor<4x?x?xf32>
  %ctx = tfm.matmul %p, %vh : (tensor<4x?x?xf32>, tensor<4x?x8xf32>) -> tensor<4x?x8xf32>
  %out = tfm.transpose %ctx [1, 0, 2] : (tensor<4x?x8xf32>) -> tensor<?x4x8xf32>
  return %out : tensor<?x4x8xf32>
}

// -----

// An arbitrary additive mask is not the causal one.
// CHECK-LABEL: func.func @additive_mask
// CHECK-NOT: tfm.attention
// CHECK: tfm.add
// CHECK: tfm.softmax
func.func @additive_mask(%q: tensor<?x4x8xf32>, %k: tensor<?x4x8xf32>, %v: tensor<?x4x8xf32>, %mask: tensor<4x?x?xf32>) -> tensor<?x4x8xf32> {
  %qh = tfm.transpose %q [1, 0, 2] : (tensor<?x4x8xf32>) -> tensor<4x?x8xf32>
  %kt = tfm.transpose %k [1, 2, 0] : (tensor<?x4x8xf32>) -> tensor<4x8x?xf32>
  %vh = tfm.transpose %v [1, 0, 2] : (tensor<?x4x8xf32>) -> tensor<4x?x8xf32>
  %scores = tfm.matmul %qh, %kt : (tensor<4x?x8xf32>, tensor<4x8x?xf32>) -> tensor<4x?x?xf32>
  %scaled = tfm.scale %scores, 0.353553385 : tensor<4x?x?xf32>
  %masked = tfm.add %scaled, %mask : tensor<4x?x?xf32>
  %p = tfm.softmax %masked {axis = -1 : i64} : tensor<4x?x?xf32>
  %ctx = tfm.matmul %p, %vh : (tensor<4x?x?xf32>, tensor<4x?x8xf32>) -> tensor<4x?x8xf32>
  %out = tfm.transpose %ctx [1, 0, 2] : (tensor<4x?x8xf32>) -> tensor<?x4x8xf32>
  return %out : tensor<?x4x8xf32>
}

// -----

// A sliding-window mask: the window moves onto the fused attention.
// CHECK-LABEL: func.func @sliding_window
// CHECK: tfm.attention %{{.*}}, %{{.*}}, %{{.*}} {causal, scale = 0.353553385 : f32, window = 32 : i64}
// CHECK-NOT: tfm.causal_mask
func.func @sliding_window(%q: tensor<?x4x8xf32>, %k: tensor<?x4x8xf32>, %v: tensor<?x4x8xf32>) -> tensor<?x4x8xf32> {
  %qh = tfm.transpose %q [1, 0, 2] : (tensor<?x4x8xf32>) -> tensor<4x?x8xf32>
  %kt = tfm.transpose %k [1, 2, 0] : (tensor<?x4x8xf32>) -> tensor<4x8x?xf32>
  %vh = tfm.transpose %v [1, 0, 2] : (tensor<?x4x8xf32>) -> tensor<4x?x8xf32>
  %scores = tfm.matmul %qh, %kt : (tensor<4x?x8xf32>, tensor<4x8x?xf32>) -> tensor<4x?x?xf32>
  %scaled = tfm.scale %scores, 0.353553385 : tensor<4x?x?xf32>
  %masked = tfm.causal_mask %scaled {window = 32 : i64} : tensor<4x?x?xf32>
  %p = tfm.softmax %masked {axis = -1 : i64} : tensor<4x?x?xf32>
  %ctx = tfm.matmul %p, %vh : (tensor<4x?x?xf32>, tensor<4x?x8xf32>) -> tensor<4x?x8xf32>
  %out = tfm.transpose %ctx [1, 0, 2] : (tensor<4x?x8xf32>) -> tensor<?x4x8xf32>
  return %out : tensor<?x4x8xf32>
}

// -----

// Gemma 2's soft cap between the scale and the mask (scale by 1 / cap, tanh,
// scale by cap) becomes the attention's softcap.
// CHECK-LABEL: func.func @soft_capped
// CHECK: tfm.attention %{{.*}}, %{{.*}}, %{{.*}} {causal, scale = 2.500000e-01 : f32, softcap = 5.000000e+01 : f32, window = 32 : i64}
// CHECK-NOT: tfm.tanh
func.func @soft_capped(%q: tensor<?x4x16xf32>, %k: tensor<?x4x16xf32>, %v: tensor<?x4x16xf32>) -> tensor<?x4x16xf32> {
  %qh = tfm.transpose %q [1, 0, 2] : (tensor<?x4x16xf32>) -> tensor<4x?x16xf32>
  %kt = tfm.transpose %k [1, 2, 0] : (tensor<?x4x16xf32>) -> tensor<4x16x?xf32>
  %vh = tfm.transpose %v [1, 0, 2] : (tensor<?x4x16xf32>) -> tensor<4x?x16xf32>
  %scores = tfm.matmul %qh, %kt : (tensor<4x?x16xf32>, tensor<4x16x?xf32>) -> tensor<4x?x?xf32>
  %scaled = tfm.scale %scores, 0.25 : tensor<4x?x?xf32>
  %shrunk = tfm.scale %scaled, 0.02 : tensor<4x?x?xf32>
  %bent = tfm.tanh %shrunk : tensor<4x?x?xf32>
  %capped = tfm.scale %bent, 50.0 : tensor<4x?x?xf32>
  %masked = tfm.causal_mask %capped {window = 32 : i64} : tensor<4x?x?xf32>
  %p = tfm.softmax %masked {axis = -1 : i64} : tensor<4x?x?xf32>
  %ctx = tfm.matmul %p, %vh : (tensor<4x?x?xf32>, tensor<4x?x16xf32>) -> tensor<4x?x16xf32>
  %out = tfm.transpose %ctx [1, 0, 2] : (tensor<4x?x16xf32>) -> tensor<?x4x16xf32>
  return %out : tensor<?x4x16xf32>
}

// -----

// Factors that are not a cap and its reciprocal are no soft cap: the tanh
// chain stays, and so does the unfused attention around it.
// CHECK-LABEL: func.func @not_a_soft_cap
// CHECK: tfm.tanh
// CHECK-NOT: tfm.attention
func.func @not_a_soft_cap(%q: tensor<?x4x16xf32>, %k: tensor<?x4x16xf32>, %v: tensor<?x4x16xf32>) -> tensor<?x4x16xf32> {
  %qh = tfm.transpose %q [1, 0, 2] : (tensor<?x4x16xf32>) -> tensor<4x?x16xf32>
  %kt = tfm.transpose %k [1, 2, 0] : (tensor<?x4x16xf32>) -> tensor<4x16x?xf32>
  %vh = tfm.transpose %v [1, 0, 2] : (tensor<?x4x16xf32>) -> tensor<4x?x16xf32>
  %scores = tfm.matmul %qh, %kt : (tensor<4x?x16xf32>, tensor<4x16x?xf32>) -> tensor<4x?x?xf32>
  %scaled = tfm.scale %scores, 0.25 : tensor<4x?x?xf32>
  %shrunk = tfm.scale %scaled, 0.5 : tensor<4x?x?xf32>
  %bent = tfm.tanh %shrunk : tensor<4x?x?xf32>
  %capped = tfm.scale %bent, 50.0 : tensor<4x?x?xf32>
  %masked = tfm.causal_mask %capped : tensor<4x?x?xf32>
  %p = tfm.softmax %masked {axis = -1 : i64} : tensor<4x?x?xf32>
  %ctx = tfm.matmul %p, %vh : (tensor<4x?x?xf32>, tensor<4x?x16xf32>) -> tensor<4x?x16xf32>
  %out = tfm.transpose %ctx [1, 0, 2] : (tensor<4x?x16xf32>) -> tensor<?x4x16xf32>
  return %out : tensor<?x4x16xf32>
}
