// RUN: kvjit-opt %s --split-input-file --choose-weight-layouts="isa=avx512vnni policy=every" | FileCheck %s
// RUN: kvjit-opt %s --split-input-file --choose-weight-layouts="isa=avx512vnni" | FileCheck %s --check-prefix=MEASURED
// RUN: kvjit-opt %s --split-input-file --choose-weight-layouts="isa=avx2" | FileCheck %s --check-prefix=AVX2
// RUN: kvjit-opt %s --split-input-file --choose-weight-layouts="isa=avx512vnni cpu=zen4" | FileCheck %s --check-prefix=ZEN4
// RUN: kvjit-opt %s --split-input-file --choose-weight-layouts="isa=avx2 cpu=zen4" | FileCheck %s --check-prefix=AVX2
// RUN: kvjit-opt %s --split-input-file --choose-weight-layouts="isa=avx512vnni cpu=zen5" | FileCheck %s --check-prefix=ZEN5
// RUN: kvjit-opt %s --split-input-file --choose-weight-layouts="isa=avx2 cpu=zen5" | FileCheck %s --check-prefix=AVX2
// RUN: not kvjit-opt %s --split-input-file --choose-weight-layouts="isa=sse4" --mlir-print-op-on-diagnostic=false 2>&1 | FileCheck %s --check-prefix=ISA
// RUN: not kvjit-opt %s --split-input-file --choose-weight-layouts="isa=avx2 cpu=zen6" --mlir-print-op-on-diagnostic=false 2>&1 | FileCheck %s --check-prefix=CPU
// RUN: not kvjit-opt %s --split-input-file --choose-weight-layouts="isa=avx2 policy=fastest" --mlir-print-op-on-diagnostic=false 2>&1 | FileCheck %s --check-prefix=POLICY

// ISA: error: choose-weight-layouts: isa 'sse4' is none of avx512vnni, avx2, portable
// POLICY: error: choose-weight-layouts: policy 'fastest' is neither measured nor every
// CPU: error: choose-weight-layouts: cpu 'zen6' is none of generic, zen4, zen5

// Matrices of 32-element block types, with a multiple of 8 rows, that only
// linears read as their weight: policy=every interleaves them; the measured
// policy chooses the layout for Q4_1 and Q8_0 (in rows this short) on
// AVX-512 VNNI Zen 4, and for Q4_0 too on Zen 5, alone
// (ChooseWeightLayouts.cpp).
// CHECK: tfm.param @down.weight : tensor<64x32xf32> storage <q4_1> layout <rows_interleaved8>
// CHECK: tfm.param @up.weight : tensor<32x64xf32> storage <q8_0> layout <rows_interleaved8>
// CHECK: tfm.param @gate.weight : tensor<32x32xf32> storage <q4_0> layout <rows_interleaved8>
// CHECK-LABEL: func.func @linears
// ZEN4: tfm.param @down.weight : tensor<64x32xf32> storage <q4_1> layout <rows_interleaved8>
// ZEN4: tfm.param @up.weight : tensor<32x64xf32> storage <q8_0> layout <rows_interleaved8>
// ZEN4: tfm.param @gate.weight : tensor<32x32xf32> storage <q4_0>{{$}}
// ZEN4-LABEL: func.func @linears
// ZEN5: tfm.param @down.weight : tensor<64x32xf32> storage <q4_1> layout <rows_interleaved8>
// ZEN5: tfm.param @up.weight : tensor<32x64xf32> storage <q8_0> layout <rows_interleaved8>
// ZEN5: tfm.param @gate.weight : tensor<32x32xf32> storage <q4_0> layout <rows_interleaved8>
// ZEN5-LABEL: func.func @linears
// MEASURED-NOT: layout
// MEASURED-LABEL: func.func @linears
// AVX2-NOT: layout
// AVX2-LABEL: func.func @linears
tfm.param @down.weight : tensor<64x32xf32> storage <q4_1>
tfm.param @up.weight : tensor<32x64xf32> storage <q8_0>
tfm.param @gate.weight : tensor<32x32xf32> storage <q4_0>
func.func @linears(%h: tensor<?x32xf32>) -> tensor<?x32xf32> {
  %wd = tfm.weight @down.weight : tensor<64x32xf32>
  %d = tfm.linear %h, %wd : (tensor<?x32xf32>, tensor<64x32xf32>) -> tensor<?x64xf32>
  %wu = tfm.weight @up.weight : tensor<32x64xf32>
  %u = tfm.linear %d, %wu : (tensor<?x64xf32>, tensor<32x64xf32>) -> tensor<?x32xf32>
  %wg = tfm.weight @gate.weight : tensor<32x32xf32>
  %g = tfm.linear %u, %wg : (tensor<?x32xf32>, tensor<32x32xf32>) -> tensor<?x32xf32>
  return %g : tensor<?x32xf32>
}

// -----

// On Zen 4 the measured policy interleaves Q8_0 only in rows of at most 1024
// columns (the bound itself included); Zen 5 in rows of any length.
// ZEN4: tfm.param @at_bound.weight : tensor<8x1024xf32> storage <q8_0> layout <rows_interleaved8>
// ZEN4: tfm.param @past_bound.weight : tensor<8x1056xf32> storage <q8_0>{{$}}
// ZEN4-LABEL: func.func @row_lengths
// ZEN5: tfm.param @at_bound.weight : tensor<8x1024xf32> storage <q8_0> layout <rows_interleaved8>
// ZEN5: tfm.param @past_bound.weight : tensor<8x1056xf32> storage <q8_0> layout <rows_interleaved8>
// ZEN5-LABEL: func.func @row_lengths
// CHECK-LABEL: func.func @row_lengths
tfm.param @at_bound.weight : tensor<8x1024xf32> storage <q8_0>
tfm.param @past_bound.weight : tensor<8x1056xf32> storage <q8_0>
func.func @row_lengths(%h: tensor<?x1024xf32>, %g: tensor<?x1056xf32>) -> (tensor<?x8xf32>, tensor<?x8xf32>) {
  %wa = tfm.weight @at_bound.weight : tensor<8x1024xf32>
  %a = tfm.linear %h, %wa : (tensor<?x1024xf32>, tensor<8x1024xf32>) -> tensor<?x8xf32>
  %wp = tfm.weight @past_bound.weight : tensor<8x1056xf32>
  %p = tfm.linear %g, %wp : (tensor<?x1056xf32>, tensor<8x1056xf32>) -> tensor<?x8xf32>
  return %a, %p : tensor<?x8xf32>, tensor<?x8xf32>
}

// -----

// fuse-projections' concatenation is a linear's weight like any other; its
// parts, read by no linear, keep GGUF's rows.
// CHECK: tfm.param @q.weight : tensor<16x32xf32> storage <q4_1>{{$}}
// CHECK: tfm.param @k.weight : tensor<16x32xf32> storage <q4_1>{{$}}
// CHECK: tfm.param @"q.weight+k.weight" : tensor<32x32xf32> storage <q4_1> layout <rows_interleaved8> concat [@q.weight, @k.weight]
// CHECK-LABEL: func.func @concatenation
tfm.param @q.weight : tensor<16x32xf32> storage <q4_1>
tfm.param @k.weight : tensor<16x32xf32> storage <q4_1>
tfm.param @"q.weight+k.weight" : tensor<32x32xf32> storage <q4_1> concat [@q.weight, @k.weight]
func.func @concatenation(%h: tensor<?x32xf32>) -> tensor<?x32xf32> {
  %w = tfm.weight @"q.weight+k.weight" : tensor<32x32xf32>
  %qk = tfm.linear %h, %w : (tensor<?x32xf32>, tensor<32x32xf32>) -> tensor<?x32xf32>
  return %qk : tensor<?x32xf32>
}

// -----

// A tied embedding is also the output projection: the lookup reads either
// layout, so the table qualifies as any linear's weight does.
// CHECK: tfm.param @token_embd.weight : tensor<64x32xf32> storage <q8_0> layout <rows_interleaved8>
// CHECK-LABEL: func.func @tied_embedding
tfm.param @token_embd.weight : tensor<64x32xf32> storage <q8_0>
func.func @tied_embedding(%ids: tensor<?xi32>) -> tensor<?x64xf32> {
  %table = tfm.weight @token_embd.weight : tensor<64x32xf32>
  %x = tfm.embedding %table, %ids : (tensor<64x32xf32>, tensor<?xi32>) -> tensor<?x32xf32>
  %out = tfm.weight @token_embd.weight : tensor<64x32xf32>
  %logits = tfm.linear %x, %out : (tensor<?x32xf32>, tensor<64x32xf32>) -> tensor<?x64xf32>
  return %logits : tensor<?x64xf32>
}

// -----

// Left in GGUF's rows: a float matrix, a K-quant (256-element super-blocks),
// a row count that is no multiple of 8, and a weight value read as a
// linear's input besides.
// CHECK-NOT: layout
// CHECK-LABEL: func.func @not_interleavable
tfm.param @f32.weight : tensor<32x32xf32> storage <f32>
tfm.param @q4_k.weight : tensor<32x256xf32> storage <q4_k>
tfm.param @twelve_rows.weight : tensor<12x32xf32> storage <q4_1>
tfm.param @square.weight : tensor<32x32xf32> storage <q8_0>
func.func @not_interleavable(%h: tensor<?x32xf32>, %g: tensor<?x256xf32>) -> (tensor<?x32xf32>, tensor<?x32xf32>, tensor<?x12xf32>, tensor<32x32xf32>) {
  %wf = tfm.weight @f32.weight : tensor<32x32xf32>
  %f = tfm.linear %h, %wf : (tensor<?x32xf32>, tensor<32x32xf32>) -> tensor<?x32xf32>
  %wk = tfm.weight @q4_k.weight : tensor<32x256xf32>
  %k = tfm.linear %g, %wk : (tensor<?x256xf32>, tensor<32x256xf32>) -> tensor<?x32xf32>
  %wt = tfm.weight @twelve_rows.weight : tensor<12x32xf32>
  %t = tfm.linear %h, %wt : (tensor<?x32xf32>, tensor<12x32xf32>) -> tensor<?x12xf32>
  %ws = tfm.weight @square.weight : tensor<32x32xf32>
  %s = tfm.linear %ws, %ws : (tensor<32x32xf32>, tensor<32x32xf32>) -> tensor<32x32xf32>
  return %f, %k, %t, %s : tensor<?x32xf32>, tensor<?x32xf32>, tensor<?x12xf32>, tensor<32x32xf32>
}

// -----

// A layout already chosen stays as it is.
// CHECK: tfm.param @chosen.weight : tensor<32x32xf32> storage <q8_0> layout <gguf>
// CHECK-LABEL: func.func @chosen
tfm.param @chosen.weight : tensor<32x32xf32> storage <q8_0> layout <gguf>
func.func @chosen(%h: tensor<?x32xf32>) -> tensor<?x32xf32> {
  %w = tfm.weight @chosen.weight : tensor<32x32xf32>
  %y = tfm.linear %h, %w : (tensor<?x32xf32>, tensor<32x32xf32>) -> tensor<?x32xf32>
  return %y : tensor<?x32xf32>
}
