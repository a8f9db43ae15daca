// RUN: kvjit-opt %s --allow-unregistered-dialect --split-input-file --plan-memory="max-tokens-per-step=8 kv-memory-mib=1" | FileCheck %s
// RUN: kvjit-opt %s --allow-unregistered-dialect --split-input-file --plan-memory="max-tokens-per-step=8 kv-memory-mib=1 report" --mlir-print-op-on-diagnostic=false -o /dev/null 2>&1 | FileCheck %s --check-prefix=REPORT

// Each silu's input dies at the silu, so the chain needs two buffers that
// take turns; a result never shares bytes with its own operand.
// CHECK-LABEL: func.func @chain
// CHECK-SAME: kernel.arena = #kernel.arena<bytes = 2048, naive_bytes = 4096, max_tokens = 8, alignment = 256>
// CHECK: tfm.silu %{{.*}} {kernel.arena_offsets = array<i64: 0>}
// CHECK: tfm.silu %{{.*}} {kernel.arena_offsets = array<i64: 1024>}
// CHECK: tfm.silu %{{.*}} {kernel.arena_offsets = array<i64: 0>}
// CHECK: tfm.silu %{{.*}} {kernel.arena_offsets = array<i64: 1024>}
// REPORT: remark: memory plan of @chain
// REPORT-NEXT: activations: 4 values in an arena of 2048 bytes, naive sum 4096 bytes, reuse 2.00x, for 8 tokens per step
// REPORT-NEXT: kv cache: none
func.func @chain(%x: tensor<4x64xf32>) -> tensor<4x64xf32> {
  %a = tfm.silu %x : tensor<4x64xf32>
  %b = tfm.silu %a : tensor<4x64xf32>
  %c = tfm.silu %b : tensor<4x64xf32>
  %d = tfm.silu %c : tensor<4x64xf32>
  return %d : tensor<4x64xf32>
}

// -----

// %a lives across %b and %c; once it dies, %d takes its bytes. Weights and
// arguments take no arena space.
tfm.param @w : tensor<64x64xf32> storage <f32>
// CHECK-LABEL: func.func @diamond
// CHECK-SAME: kernel.arena = #kernel.arena<bytes = 3072, naive_bytes = 5120,
// CHECK: tfm.weight @w {kernel.arena_offsets = array<i64: -1>}
// CHECK: tfm.linear {{.*}} {kernel.arena_offsets = array<i64: 0>}
// CHECK: tfm.silu {{.*}} {kernel.arena_offsets = array<i64: 1024>}
// CHECK: tfm.silu {{.*}} {kernel.arena_offsets = array<i64: 2048>}
// CHECK: tfm.add {{.*}} {kernel.arena_offsets = array<i64: 0>}
// CHECK: tfm.mul {{.*}} {kernel.arena_offsets = array<i64: 1024>}
// REPORT: remark: memory plan of @diamond
// REPORT-NEXT: activations: 5 values in an arena of 3072 bytes, naive sum 5120 bytes, reuse 1.67x
func.func @diamond(%x: tensor<4x64xf32>) -> tensor<4x64xf32> {
  %w = tfm.weight @w : tensor<64x64xf32>
  %a = tfm.linear %x, %w : (tensor<4x64xf32>, tensor<64x64xf32>) -> tensor<4x64xf32>
  %b = tfm.silu %a : tensor<4x64xf32>
  %c = tfm.silu %a : tensor<4x64xf32>
  %d = tfm.add %b, %c : tensor<4x64xf32>
  %e = tfm.mul %d, %d : tensor<4x64xf32>
  return %e : tensor<4x64xf32>
}

// -----

// Dynamic dimensions are bounded by max-tokens-per-step (8): the [4, T, T]
// scores take 4·8·8·4 = 1024 bytes, the [4, T, 16] output 2048, and the
// [T, 3] tail's 96 bytes round up to one 256-byte slot. The largest value is
// placed first; the scores, dead before it is defined, share its bytes.
// CHECK-LABEL: func.func @dynamic
// CHECK-SAME: kernel.arena = #kernel.arena<bytes = 3072, naive_bytes = 4352,
// CHECK: tfm.matmul {{.*}} {kernel.arena_offsets = array<i64: 0>} : {{.*}} -> tensor<4x?x?xf32>
// CHECK: tfm.softmax {{.*}} {axis = 2 : i64, kernel.arena_offsets = array<i64: 2048>}
// CHECK: tfm.matmul {{.*}} {kernel.arena_offsets = array<i64: 0>} : {{.*}} -> tensor<4x?x16xf32>
// CHECK: tfm.silu {{.*}} {kernel.arena_offsets = array<i64: 2048>} : tensor<?x3xf32>
// REPORT: remark: memory plan of @dynamic
// REPORT-NEXT: activations: 4 values in an arena of 3072 bytes, naive sum 4352 bytes, reuse 1.42x, for 8 tokens per step
func.func @dynamic(%q: tensor<4x?x16xf32>, %kt: tensor<4x16x?xf32>, %v: tensor<4x?x16xf32>,
                   %tail: tensor<?x3xf32>) -> (tensor<4x?x16xf32>, tensor<?x3xf32>) {
  %scores = tfm.matmul %q, %kt : (tensor<4x?x16xf32>, tensor<4x16x?xf32>) -> tensor<4x?x?xf32>
  %probs = tfm.softmax %scores {axis = 2 : i64} : tensor<4x?x?xf32>
  %out = tfm.matmul %probs, %v : (tensor<4x?x?xf32>, tensor<4x?x16xf32>) -> tensor<4x?x16xf32>
  %tail_out = tfm.silu %tail : tensor<?x3xf32>
  return %out, %tail_out : tensor<4x?x16xf32>, tensor<?x3xf32>
}

// -----

// A use inside a region (a fusion) keeps the value alive until that op: %a
// is still live when %b is defined, so they cannot share bytes. Ops inside
// the region are the fusion's own business and get no offsets.
// CHECK-LABEL: func.func @region_use
// CHECK: tfm.silu {{.*}} {kernel.arena_offsets = array<i64: 0>}
// CHECK: tfm.silu {{.*}} {kernel.arena_offsets = array<i64: 1024>}
// CHECK: "test.fused"
// CHECK-NEXT: tfm.add
// CHECK-NOT: kernel.arena_offsets
// CHECK: "test.yield"
// CHECK-NEXT: kernel.arena_offsets = array<i64: 2048>
func.func @region_use(%x: tensor<4x64xf32>) -> (tensor<4x64xf32>, tensor<4x64xf32>) {
  %a = tfm.silu %x : tensor<4x64xf32>
  %b = tfm.silu %x : tensor<4x64xf32>
  %fused = "test.fused"() ({
    %sum = tfm.add %a, %a : tensor<4x64xf32>
    "test.yield"(%sum) : (tensor<4x64xf32>) -> ()
  }) : () -> tensor<4x64xf32>
  return %b, %fused : tensor<4x64xf32>, tensor<4x64xf32>
}

// -----

// One block holds every layer's K and V for 16 tokens:
// 2 × 2 layers × 4 kv_heads × 8 head_dim × 16 slots × 2 bytes (f16) = 4096,
// and a 1 MiB budget holds 256 of them.
!cache = !kv.cache<layers = 2, kv_heads = 4, head_dim = 8, block_size = 16, key_type = f16, value_type = f16>
// CHECK-LABEL: func.func @step
// CHECK-SAME: kernel.arena = #kernel.arena<bytes = 2048, naive_bytes = 2048, max_tokens = 8, alignment = 256>
// CHECK-SAME: kv.layout = #kv.layout<block_size = 16, key_type = f16, value_type = f16, block_bytes = 4096, blocks = 256, layer_stride_bytes = 2048, value_offset_bytes = 1024, key_slot_stride_bytes = 64, value_slot_stride_bytes = 64>
// CHECK: kv.write
// CHECK-NOT: kernel.arena_offsets
// CHECK-SAME: !kv.cache
// CHECK: kv.attention {{.*}} {kernel.arena_offsets = array<i64: 0>
// REPORT: remark: memory plan of @step
// REPORT-NEXT: activations: 1 values in an arena of 2048 bytes, naive sum 2048 bytes, reuse 1.00x, for 8 tokens per step
// REPORT-NEXT: kv cache: f16 keys, f16 values, 4096 bytes per block of 16 tokens, 256 blocks (4096 tokens) in 1 MiB
func.func @step(%q: tensor<?x8x8xf32>, %k: tensor<?x4x8xf32>, %v: tensor<?x4x8xf32>,
                %positions: tensor<?xi32>, %seq_starts: tensor<?xi32>,
                %context_lens: tensor<?xi32>, %slots: tensor<?xi32>,
                %tables: tensor<?x?xi32>, %cache: !cache) -> tensor<?x8x8xf32> {
  kv.write %k, %v into %cache[0] at %slots : tensor<?x4x8xf32>, tensor<?x4x8xf32>, tensor<?xi32>, !cache
  %o = kv.attention %q, %cache[0] positions %positions seq_starts %seq_starts context_lens %context_lens block_tables %tables {scale = 0.353553385 : f32} : (tensor<?x8x8xf32>, !cache, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?x?xi32>) -> tensor<?x8x8xf32>
  return %o : tensor<?x8x8xf32>
}

// -----

// Keys and values each sized by their type (runtime/schema/KvCacheFormat.h):
// a slot's q8_0 keys are 4 kv_heads x 1 block of 34 bytes = 136, its f16
// values 4 x 32 x 2 = 256; a layer is 16 x 136 + 16 x 256 = 6272 bytes, a
// block 2 layers of them = 12544, and 1 MiB holds 83.
!cache = !kv.cache<layers = 2, kv_heads = 4, head_dim = 32, block_size = 16, key_type = q8_0, value_type = f16>
// CHECK-LABEL: func.func @mixed_types
// CHECK-SAME: kv.layout = #kv.layout<block_size = 16, key_type = q8_0, value_type = f16, block_bytes = 12544, blocks = 83, layer_stride_bytes = 6272, value_offset_bytes = 2176, key_slot_stride_bytes = 136, value_slot_stride_bytes = 256>
// REPORT: remark: memory plan of @mixed_types
// REPORT: kv cache: q8_0 keys, f16 values, 12544 bytes per block of 16 tokens, 83 blocks (1328 tokens) in 1 MiB
func.func @mixed_types(%q: tensor<?x8x32xf32>, %k: tensor<?x4x32xf32>, %v: tensor<?x4x32xf32>,
                       %positions: tensor<?xi32>, %seq_starts: tensor<?xi32>,
                       %context_lens: tensor<?xi32>, %slots: tensor<?xi32>,
                       %tables: tensor<?x?xi32>, %cache: !cache) -> tensor<?x8x32xf32> {
  kv.write %k, %v into %cache[0] at %slots : tensor<?x4x32xf32>, tensor<?x4x32xf32>, tensor<?xi32>, !cache
  %o = kv.attention %q, %cache[0] positions %positions seq_starts %seq_starts context_lens %context_lens block_tables %tables {scale = 0.176776695 : f32} : (tensor<?x8x32xf32>, !cache, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?x?xi32>) -> tensor<?x8x32xf32>
  return %o : tensor<?x8x32xf32>
}

// -----

// A declaration has no body to plan.
// CHECK-LABEL: func.func private @external
// CHECK-NOT: kernel.arena
// CHECK-NOT: kv.layout
func.func private @external(%x: tensor<?x64xf32>) -> tensor<?x64xf32>

// -----

// Column views take no arena bytes and keep what they view alive: %fused
// lives until %d reads its second view, so %c and %d cannot take its bytes;
// only %e, after it, does.
// CHECK-LABEL: func.func @views
// CHECK-SAME: kernel.arena = #kernel.arena<bytes = 2048,
// CHECK: %[[FUSED:.*]] = tfm.silu %{{.*}} {kernel.arena_offsets = array<i64: 0>}
// CHECK: tfm.slice_columns %[[FUSED]] {kernel.arena_offsets = array<i64: -1>, offset = 0 : i64, size = 32 : i64}
// CHECK: tfm.slice_columns %[[FUSED]] {kernel.arena_offsets = array<i64: -1>, offset = 32 : i64, size = 32 : i64}
// CHECK: tfm.silu %{{.*}} {kernel.arena_offsets = array<i64: 1024>}
// CHECK: tfm.silu %{{.*}} {kernel.arena_offsets = array<i64: 1536>}
// CHECK: tfm.mul %{{.*}} {kernel.arena_offsets = array<i64: 0>}
func.func @views(%x: tensor<4x64xf32>) -> tensor<4x32xf32> {
  %fused = tfm.silu %x : tensor<4x64xf32>
  %a = tfm.slice_columns %fused {offset = 0 : i64, size = 32 : i64} : (tensor<4x64xf32>) -> tensor<4x32xf32>
  %b = tfm.slice_columns %fused {offset = 32 : i64, size = 32 : i64} : (tensor<4x64xf32>) -> tensor<4x32xf32>
  %c = tfm.silu %a : tensor<4x32xf32>
  %d = tfm.silu %b : tensor<4x32xf32>
  %e = tfm.mul %c, %d : tensor<4x32xf32>
  return %e : tensor<4x32xf32>
}
