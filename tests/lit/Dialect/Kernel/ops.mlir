// RUN: kvjit-opt %s --split-input-file | FileCheck %s
// RUN: kvjit-opt %s --split-input-file --mlir-print-op-generic | kvjit-opt --split-input-file | FileCheck %s

// CHECK-LABEL: func.func @add_rms_norm
func.func @add_rms_norm(%x: tensor<?x8xf32>, %delta: tensor<?x8xf32>, %w: tensor<8xf32>)
    -> (tensor<?x8xf32>, tensor<?x8xf32>) {
  // CHECK: %{{.*}}:2 = kernel.fusion row_wise(%{{.*}}, %{{.*}}, %{{.*}}) : (tensor<?x8xf32>, tensor<?x8xf32>, tensor<8xf32>) -> (tensor<?x8xf32>, tensor<?x8xf32>) {
  // CHECK-NEXT: ^bb0(%[[A:.*]]: tensor<?x8xf32>, %[[B:.*]]: tensor<?x8xf32>, %[[W:.*]]: tensor<8xf32>):
  // CHECK-NEXT: %[[S:.*]] = tfm.add %[[A]], %[[B]] : tensor<?x8xf32>
  // CHECK-NEXT: %[[N:.*]] = tfm.rms_norm %[[S]], %[[W]] {epsilon = 9.99999974E-6 : f32}
  // CHECK-NEXT: kernel.yield %[[S]], %[[N]] : tensor<?x8xf32>, tensor<?x8xf32>
  %sum, %normed = kernel.fusion row_wise(%x, %delta, %w)
      : (tensor<?x8xf32>, tensor<?x8xf32>, tensor<8xf32>) -> (tensor<?x8xf32>, tensor<?x8xf32>) {
  ^bb0(%a: tensor<?x8xf32>, %b: tensor<?x8xf32>, %weight: tensor<8xf32>):
    %s = tfm.add %a, %b : tensor<?x8xf32>
    %n = tfm.rms_norm %s, %weight {epsilon = 1.0e-05 : f32} : tensor<?x8xf32>, tensor<8xf32>
    kernel.yield %s, %n : tensor<?x8xf32>, tensor<?x8xf32>
  }
  return %sum, %normed : tensor<?x8xf32>, tensor<?x8xf32>
}

// -----

// CHECK-LABEL: func.func @rms_norm
func.func @rms_norm(%x: tensor<?x8xf32>, %w: tensor<8xf32>) -> tensor<?x8xf32> {
  // CHECK: kernel.fusion row_wise(%{{.*}}, %{{.*}}) : (tensor<?x8xf32>, tensor<8xf32>) -> tensor<?x8xf32>
  // CHECK: tfm.rms_norm
  %normed = kernel.fusion row_wise(%x, %w) : (tensor<?x8xf32>, tensor<8xf32>) -> tensor<?x8xf32> {
  ^bb0(%a: tensor<?x8xf32>, %weight: tensor<8xf32>):
    %n = tfm.rms_norm %a, %weight {epsilon = 1.0e-05 : f32} : tensor<?x8xf32>, tensor<8xf32>
    kernel.yield %n : tensor<?x8xf32>
  }
  return %normed : tensor<?x8xf32>
}

// -----

// CHECK-LABEL: func.func @swiglu
func.func @swiglu(%gate: tensor<?x16xf32>, %up: tensor<?x16xf32>) -> tensor<?x16xf32> {
  // CHECK: kernel.fusion swiglu(%{{.*}}, %{{.*}}) : (tensor<?x16xf32>, tensor<?x16xf32>) -> tensor<?x16xf32>
  // CHECK: %[[G:.*]] = tfm.silu
  // CHECK-NEXT: %[[P:.*]] = tfm.mul %[[G]], %{{.*}}
  // CHECK-NEXT: kernel.yield %[[P]]
  %product = kernel.fusion swiglu(%gate, %up)
      : (tensor<?x16xf32>, tensor<?x16xf32>) -> tensor<?x16xf32> {
  ^bb0(%g: tensor<?x16xf32>, %u: tensor<?x16xf32>):
    %activated = tfm.silu %g : tensor<?x16xf32>
    %p = tfm.mul %activated, %u : tensor<?x16xf32>
    kernel.yield %p : tensor<?x16xf32>
  }
  return %product : tensor<?x16xf32>
}

// -----

// CHECK-LABEL: func.func @rope
func.func @rope(%q: tensor<?x4x8xf32>, %positions: tensor<?xi32>) -> tensor<?x4x8xf32> {
  // CHECK: kernel.fusion row_wise(%{{.*}}, %{{.*}}) : (tensor<?x4x8xf32>, tensor<?xi32>) -> tensor<?x4x8xf32>
  // CHECK: tfm.rope %{{.*}}, %{{.*}} {style = #tfm.rope_style<neox>, theta = 1.000000e+04 : f32}
  %rotated = kernel.fusion row_wise(%q, %positions)
      : (tensor<?x4x8xf32>, tensor<?xi32>) -> tensor<?x4x8xf32> {
  ^bb0(%heads: tensor<?x4x8xf32>, %p: tensor<?xi32>):
    %r = tfm.rope %heads, %p {style = #tfm.rope_style<neox>, theta = 1.0e+04 : f32}
        : tensor<?x4x8xf32>, tensor<?xi32>
    kernel.yield %r : tensor<?x4x8xf32>
  }
  return %rotated : tensor<?x4x8xf32>
}

// -----

// A chain with two outputs: the scaled scores and the masked ones.
// CHECK-LABEL: func.func @elementwise
func.func @elementwise(%scores: tensor<2x?x?xf32>) -> (tensor<2x?x?xf32>, tensor<2x?x?xf32>) {
  // CHECK: %{{.*}}:2 = kernel.fusion elementwise(%{{.*}}) : (tensor<2x?x?xf32>) -> (tensor<2x?x?xf32>, tensor<2x?x?xf32>)
  // CHECK: tfm.scale
  // CHECK-NEXT: tfm.causal_mask
  // CHECK-NEXT: kernel.yield
  %scaled, %masked = kernel.fusion elementwise(%scores)
      : (tensor<2x?x?xf32>) -> (tensor<2x?x?xf32>, tensor<2x?x?xf32>) {
  ^bb0(%s: tensor<2x?x?xf32>):
    %a = tfm.scale %s, 5.000000e-01 : tensor<2x?x?xf32>
    %m = tfm.causal_mask %a : tensor<2x?x?xf32>
    kernel.yield %a, %m : tensor<2x?x?xf32>, tensor<2x?x?xf32>
  }
  return %scaled, %masked : tensor<2x?x?xf32>, tensor<2x?x?xf32>
}

// -----

// plan-memory's activation arena, typed: it prints as it parses.
// CHECK-LABEL: func.func @planned
// CHECK-SAME: kernel.arena = #kernel.arena<bytes = 2048, naive_bytes = 4096, max_tokens = 8, alignment = 256>
// CHECK: tfm.silu %{{.*}} {kernel.arena_offsets = array<i64: 1024>}
func.func @planned(%x: tensor<4x64xf32>) -> tensor<4x64xf32> attributes {kernel.arena = #kernel.arena<bytes = 2048, naive_bytes = 4096, max_tokens = 8, alignment = 256>} {
  %a = tfm.silu %x {kernel.arena_offsets = array<i64: 1024>} : tensor<4x64xf32>
  return %a : tensor<4x64xf32>
}
