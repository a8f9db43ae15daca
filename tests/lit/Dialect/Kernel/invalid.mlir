// RUN: kvjit-opt %s --split-input-file --verify-diagnostics

func.func @argument_count(%x: tensor<?x8xf32>) -> tensor<?x8xf32> {
  // expected-error @+1 {{'kernel.fusion' op body has 2 arguments but the fusion has 1 operands}}
  %r = kernel.fusion elementwise(%x) : (tensor<?x8xf32>) -> tensor<?x8xf32> {
  ^bb0(%a: tensor<?x8xf32>, %b: tensor<?x8xf32>):
    %s = tfm.add %a, %b : tensor<?x8xf32>
    kernel.yield %s : tensor<?x8xf32>
  }
  return %r : tensor<?x8xf32>
}

// -----

func.func @argument_type(%x: tensor<?x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'kernel.fusion' op body argument #0 has type 'tensor<4x8xf32>' but operand #0 has type 'tensor<?x8xf32>'}}
  %r = kernel.fusion elementwise(%x) : (tensor<?x8xf32>) -> tensor<4x8xf32> {
  ^bb0(%a: tensor<4x8xf32>):
    %s = tfm.silu %a : tensor<4x8xf32>
    kernel.yield %s : tensor<4x8xf32>
  }
  return %r : tensor<4x8xf32>
}

// -----

func.func @yield_count(%x: tensor<?x8xf32>) -> tensor<?x8xf32> {
  // expected-error @+1 {{'kernel.fusion' op body yields 2 values but the fusion has 1 results}}
  %r = kernel.fusion elementwise(%x) : (tensor<?x8xf32>) -> tensor<?x8xf32> {
  ^bb0(%a: tensor<?x8xf32>):
    %s = tfm.silu %a : tensor<?x8xf32>
    kernel.yield %s, %s : tensor<?x8xf32>, tensor<?x8xf32>
  }
  return %r : tensor<?x8xf32>
}

// -----

func.func @yield_type(%x: tensor<?x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'kernel.fusion' op body yields 'tensor<?x8xf32>' as value #0 but result #0 has type 'tensor<4x8xf32>'}}
  %r = kernel.fusion elementwise(%x) : (tensor<?x8xf32>) -> tensor<4x8xf32> {
  ^bb0(%a: tensor<?x8xf32>):
    %s = tfm.silu %a : tensor<?x8xf32>
    kernel.yield %s : tensor<?x8xf32>
  }
  return %r : tensor<4x8xf32>
}

// -----

func.func @gemm_inside(%x: tensor<?x8xf32>, %w: tensor<8x8xf32>) -> tensor<?x8xf32> {
  // expected-error @+1 {{'kernel.fusion' op body holds 'tfm.linear', which is neither elementwise nor row-wise and runs outside fusions}}
  %r = kernel.fusion elementwise(%x, %w) : (tensor<?x8xf32>, tensor<8x8xf32>) -> tensor<?x8xf32> {
  ^bb0(%a: tensor<?x8xf32>, %weight: tensor<8x8xf32>):
    %y = tfm.linear %a, %weight : (tensor<?x8xf32>, tensor<8x8xf32>) -> tensor<?x8xf32>
    %s = tfm.silu %y : tensor<?x8xf32>
    kernel.yield %s : tensor<?x8xf32>
  }
  return %r : tensor<?x8xf32>
}

// -----

func.func @add_rms_norm_without_sum(%x: tensor<?x8xf32>, %d: tensor<?x8xf32>, %w: tensor<8xf32>)
    -> tensor<?x8xf32> {
  // expected-error @+1 {{'kernel.fusion' op of kind row_wise must hold one row-wise op, after a tfm.add of its first operand only where the op fuses a residual add, and yield the sum (if any) and the op's result}}
  %r = kernel.fusion row_wise(%x, %d, %w)
      : (tensor<?x8xf32>, tensor<?x8xf32>, tensor<8xf32>) -> tensor<?x8xf32> {
  ^bb0(%a: tensor<?x8xf32>, %b: tensor<?x8xf32>, %weight: tensor<8xf32>):
    %s = tfm.add %a, %b : tensor<?x8xf32>
    %n = tfm.rms_norm %s, %weight {epsilon = 1.0e-05 : f32} : tensor<?x8xf32>, tensor<8xf32>
    kernel.yield %n : tensor<?x8xf32>
  }
  return %r : tensor<?x8xf32>
}

// -----

func.func @add_rms_norm_of_other(%x: tensor<?x8xf32>, %d: tensor<?x8xf32>, %w: tensor<8xf32>)
    -> (tensor<?x8xf32>, tensor<?x8xf32>) {
  // expected-error @+1 {{'kernel.fusion' op of kind row_wise must hold one row-wise op, after a tfm.add of its first operand}}
  %r:2 = kernel.fusion row_wise(%x, %d, %w)
      : (tensor<?x8xf32>, tensor<?x8xf32>, tensor<8xf32>) -> (tensor<?x8xf32>, tensor<?x8xf32>) {
  ^bb0(%a: tensor<?x8xf32>, %b: tensor<?x8xf32>, %weight: tensor<8xf32>):
    %s = tfm.add %a, %b : tensor<?x8xf32>
    %n = tfm.rms_norm %a, %weight {epsilon = 1.0e-05 : f32} : tensor<?x8xf32>, tensor<8xf32>
    kernel.yield %s, %n : tensor<?x8xf32>, tensor<?x8xf32>
  }
  return %r#0, %r#1 : tensor<?x8xf32>, tensor<?x8xf32>
}

// -----

func.func @rms_norm_with_add(%x: tensor<?x8xf32>, %w: tensor<8xf32>) -> tensor<?x8xf32> {
  // expected-error @+1 {{'kernel.fusion' op of kind row_wise must hold one row-wise op}}
  %r = kernel.fusion row_wise(%x, %w) : (tensor<?x8xf32>, tensor<8xf32>) -> tensor<?x8xf32> {
  ^bb0(%a: tensor<?x8xf32>, %weight: tensor<8xf32>):
    %n = tfm.rms_norm %a, %weight {epsilon = 1.0e-05 : f32} : tensor<?x8xf32>, tensor<8xf32>
    %s = tfm.add %n, %a : tensor<?x8xf32>
    kernel.yield %s : tensor<?x8xf32>
  }
  return %r : tensor<?x8xf32>
}

// -----

func.func @swiglu_of_itself(%gate: tensor<?x16xf32>) -> tensor<?x16xf32> {
  // expected-error @+1 {{'kernel.fusion' op of kind swiglu must hold tfm.silu, then tfm.mul of its result by another value, and yield the product}}
  %r = kernel.fusion swiglu(%gate) : (tensor<?x16xf32>) -> tensor<?x16xf32> {
  ^bb0(%g: tensor<?x16xf32>):
    %activated = tfm.silu %g : tensor<?x16xf32>
    %p = tfm.mul %activated, %activated : tensor<?x16xf32>
    kernel.yield %p : tensor<?x16xf32>
  }
  return %r : tensor<?x16xf32>
}

// -----

func.func @swiglu_yields_gate(%gate: tensor<?x16xf32>, %up: tensor<?x16xf32>) -> tensor<?x16xf32> {
  // expected-error @+1 {{'kernel.fusion' op of kind swiglu must hold tfm.silu}}
  %r = kernel.fusion swiglu(%gate, %up) : (tensor<?x16xf32>, tensor<?x16xf32>) -> tensor<?x16xf32> {
  ^bb0(%g: tensor<?x16xf32>, %u: tensor<?x16xf32>):
    %activated = tfm.silu %g : tensor<?x16xf32>
    %p = tfm.mul %activated, %u : tensor<?x16xf32>
    kernel.yield %activated : tensor<?x16xf32>
  }
  return %r : tensor<?x16xf32>
}

// -----

func.func @rope_with_scale(%q: tensor<?x4x8xf32>, %positions: tensor<?xi32>) -> tensor<?x4x8xf32> {
  // expected-error @+1 {{'kernel.fusion' op of kind row_wise must hold one row-wise op}}
  %r = kernel.fusion row_wise(%q, %positions) : (tensor<?x4x8xf32>, tensor<?xi32>) -> tensor<?x4x8xf32> {
  ^bb0(%heads: tensor<?x4x8xf32>, %p: tensor<?xi32>):
    %rotated = tfm.rope %heads, %p {style = #tfm.rope_style<neox>, theta = 1.0e+04 : f32}
        : tensor<?x4x8xf32>, tensor<?xi32>
    %scaled = tfm.scale %rotated, 2.000000e+00 : tensor<?x4x8xf32>
    kernel.yield %scaled : tensor<?x4x8xf32>
  }
  return %r : tensor<?x4x8xf32>
}

// -----

func.func @elementwise_empty(%x: tensor<?x8xf32>) -> tensor<?x8xf32> {
  // expected-error @+1 {{'kernel.fusion' op of kind elementwise holds no op}}
  %r = kernel.fusion elementwise(%x) : (tensor<?x8xf32>) -> tensor<?x8xf32> {
  ^bb0(%a: tensor<?x8xf32>):
    kernel.yield %a : tensor<?x8xf32>
  }
  return %r : tensor<?x8xf32>
}

// -----

func.func @elementwise_with_norm(%x: tensor<?x8xf32>, %w: tensor<8xf32>) -> tensor<?x8xf32> {
  // expected-error @+1 {{'kernel.fusion' op of kind elementwise holds 'tfm.rms_norm', which is row-wise}}
  %r = kernel.fusion elementwise(%x, %w) : (tensor<?x8xf32>, tensor<8xf32>) -> tensor<?x8xf32> {
  ^bb0(%a: tensor<?x8xf32>, %weight: tensor<8xf32>):
    %n = tfm.rms_norm %a, %weight {epsilon = 1.0e-05 : f32} : tensor<?x8xf32>, tensor<8xf32>
    %s = tfm.silu %n : tensor<?x8xf32>
    kernel.yield %s : tensor<?x8xf32>
  }
  return %r : tensor<?x8xf32>
}

// -----

// Isolated from above: the kernel reads only its operands.
func.func @captures_value(%x: tensor<?x8xf32>, %y: tensor<?x8xf32>) -> tensor<?x8xf32> {
  // expected-note @+1 {{required by region isolation constraints}}
  %r = kernel.fusion elementwise(%x) : (tensor<?x8xf32>) -> tensor<?x8xf32> {
  ^bb0(%a: tensor<?x8xf32>):
    // expected-error @+1 {{using value defined outside the region}}
    %s = tfm.add %a, %y : tensor<?x8xf32>
    kernel.yield %s : tensor<?x8xf32>
  }
  return %r : tensor<?x8xf32>
}

// -----

func.func @yield_outside(%x: tensor<?x8xf32>) {
  // expected-error @+1 {{'kernel.yield' op expects parent op 'kernel.fusion'}}
  kernel.yield %x : tensor<?x8xf32>
}

// -----

// tfm.layer_norm is of class RowWise but does not fuse a residual add, so
// no template holds it after one.
func.func @layer_norm_after_add(%x: tensor<?x8xf32>, %d: tensor<?x8xf32>, %w: tensor<8xf32>)
    -> (tensor<?x8xf32>, tensor<?x8xf32>) {
  // expected-error @+1 {{'kernel.fusion' op of kind row_wise must hold one row-wise op, after a tfm.add of its first operand only where the op fuses a residual add}}
  %r:2 = kernel.fusion row_wise(%x, %d, %w)
      : (tensor<?x8xf32>, tensor<?x8xf32>, tensor<8xf32>) -> (tensor<?x8xf32>, tensor<?x8xf32>) {
  ^bb0(%a: tensor<?x8xf32>, %b: tensor<?x8xf32>, %weight: tensor<8xf32>):
    %s = tfm.add %a, %b : tensor<?x8xf32>
    %n = tfm.layer_norm %s, %weight {epsilon = 1.0e-05 : f32} : tensor<?x8xf32>, tensor<8xf32>
    kernel.yield %s, %n : tensor<?x8xf32>, tensor<?x8xf32>
  }
  return %r#0, %r#1 : tensor<?x8xf32>, tensor<?x8xf32>
}

// -----

// expected-error @+1 {{arena alignment must be a power of two, got 48}}
func.func @misaligned() attributes {kernel.arena = #kernel.arena<bytes = 2048, naive_bytes = 4096, max_tokens = 8, alignment = 48>} {
  return
}
