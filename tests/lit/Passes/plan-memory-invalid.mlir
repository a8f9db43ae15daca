// RUN: kvjit-opt %s --split-input-file --verify-diagnostics --plan-memory="kv-memory-mib=1"
// RUN: not kvjit-opt %s --split-input-file --plan-memory="alignment=48" --mlir-print-op-on-diagnostic=false 2>&1 | FileCheck %s --check-prefix=ALIGNMENT
// RUN: not kvjit-opt %s --split-input-file --plan-memory="max-tokens-per-step=0" --mlir-print-op-on-diagnostic=false 2>&1 | FileCheck %s --check-prefix=TOKENS

// ALIGNMENT: error: plan-memory: alignment must be a power of two, got 48
// TOKENS: error: plan-memory: max-tokens-per-step must be positive, got 0

// 2 × 32 layers × 8 kv_heads × 128 head_dim × 16 slots × 4 bytes = 4 MiB per block.
!cache = !kv.cache<layers = 32, kv_heads = 8, head_dim = 128, block_size = 16, key_type = f32, value_type = f32>
// expected-error @+1 {{function @step: the KV budget of 1 MiB (1048576 bytes) does not hold one cache block of 4194304 bytes (32 layers x 16 block_size x (4096 bytes of f32 keys + 4096 bytes of f32 values per slot)); raise kv-memory-mib}}
func.func @step(%q: tensor<?x32x128xf32>, %p: tensor<?xi32>, %t: tensor<?x?xi32>, %cache: !cache) -> tensor<?x32x128xf32> {
  %o = kv.attention %q, %cache[0] positions %p seq_starts %p context_lens %p block_tables %t {scale = 1.0 : f32} : (tensor<?x32x128xf32>, !cache, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?x?xi32>) -> tensor<?x32x128xf32>
  return %o : tensor<?x32x128xf32>
}

// -----

!cache = !kv.cache<layers = 1, kv_heads = 1, head_dim = 8, block_size = 16, key_type = f32, value_type = f32>
// expected-error @+1 {{function @two_caches takes 2 KV caches; a step function reads one pool}}
func.func @two_caches(%a: !cache, %b: !cache) {
  return
}
