// RUN: kvjit-opt %s --split-input-file | FileCheck %s
// RUN: kvjit-opt %s --split-input-file --mlir-print-op-generic | kvjit-opt --split-input-file | FileCheck %s

!cache = !kv.cache<layers = 2, kv_heads = 4, head_dim = 8, block_size = 16, key_type = f32, value_type = f32>

// CHECK-LABEL: func.func @write_then_attend
// CHECK-SAME: !kv.cache<layers = 2, kv_heads = 4, head_dim = 8, block_size = 16, key_type = f32, value_type = f32>
func.func @write_then_attend(%q: tensor<?x8x8xf32>, %k: tensor<?x4x8xf32>, %v: tensor<?x4x8xf32>,
                             %positions: tensor<?xi32>, %seq_starts: tensor<?xi32>,
                             %context_lens: tensor<?xi32>, %slots: tensor<?xi32>,
                             %tables: tensor<?x?xi32>, %cache: !cache) -> tensor<?x8x8xf32> {
  // CHECK: kv.write %{{.*}}, %{{.*}} into %{{.*}}[1] at %{{.*}} : tensor<?x4x8xf32>, tensor<?x4x8xf32>, tensor<?xi32>, !kv.cache<
  kv.write %k, %v into %cache[1] at %slots : tensor<?x4x8xf32>, tensor<?x4x8xf32>, tensor<?xi32>, !cache
  // CHECK: kv.attention %{{.*}}, %{{.*}}[1] positions %{{.*}} seq_starts %{{.*}} context_lens %{{.*}} block_tables %{{.*}} {scale = 0.353553385 : f32}
  %o = kv.attention %q, %cache[1] positions %positions seq_starts %seq_starts context_lens %context_lens block_tables %tables {scale = 0.353553385 : f32} : (tensor<?x8x8xf32>, !cache, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?x?xi32>) -> tensor<?x8x8xf32>
  return %o : tensor<?x8x8xf32>
}

// -----

!cache = !kv.cache<layers = 2, kv_heads = 4, head_dim = 8, block_size = 16, key_type = f32, value_type = f32>

// CHECK-LABEL: func.func @softcapped
func.func @softcapped(%q: tensor<?x8x8xf32>, %positions: tensor<?xi32>, %tables: tensor<?x?xi32>,
                      %cache: !cache) -> tensor<?x8x8xf32> {
  // CHECK: kv.attention {{.*}} {scale = 6.250000e-02 : f32, softcap = 5.000000e+01 : f32}
  %o = kv.attention %q, %cache[0] positions %positions seq_starts %positions context_lens %positions block_tables %tables {scale = 0.0625 : f32, softcap = 50.0 : f32} : (tensor<?x8x8xf32>, !cache, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?x?xi32>) -> tensor<?x8x8xf32>
  return %o : tensor<?x8x8xf32>
}

// -----

// plan-memory's KV layout, typed: it prints as it parses.
// CHECK-LABEL: func.func @laid_out
// CHECK-SAME: kv.layout = #kv.layout<block_size = 16, key_type = f16, value_type = f16, block_bytes = 4096, blocks = 256, layer_stride_bytes = 2048, value_offset_bytes = 1024, key_slot_stride_bytes = 64, value_slot_stride_bytes = 64>
func.func @laid_out() attributes {kv.layout = #kv.layout<block_size = 16, key_type = f16, value_type = f16, block_bytes = 4096, blocks = 256, layer_stride_bytes = 2048, value_offset_bytes = 1024, key_slot_stride_bytes = 64, value_slot_stride_bytes = 64>} {
  return
}
