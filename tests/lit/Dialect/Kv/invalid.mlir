// RUN: kvjit-opt %s --split-input-file --verify-diagnostics

// expected-error @+1 {{cache dimensions must be positive}}
func.func @bad_cache(%c: !kv.cache<layers = 0, kv_heads = 4, head_dim = 8, block_size = 16, key_type = f32, value_type = f32>)

// -----

// expected-error @+1 {{a cache of q8_0 values stores each head in blocks of 32 elements; head_dim 8 is not a multiple of 32}}
func.func @partial_block(%c: !kv.cache<layers = 1, kv_heads = 4, head_dim = 8, block_size = 16, key_type = f16, value_type = q8_0>)

// -----

// A head of 32 elements is one block of each blocked type.
func.func private @whole_blocks(%a: !kv.cache<layers = 1, kv_heads = 4, head_dim = 32, block_size = 16, key_type = q4_0, value_type = f8_e4m3>,
                                %b: !kv.cache<layers = 1, kv_heads = 4, head_dim = 64, block_size = 16, key_type = q8_0, value_type = bf16, key_rotation = 64, value_rotation = 32>)

// -----

// expected-error @+1 {{a key rotation must be 0 or a power of two dividing head_dim 64, got 48}}
func.func private @bad_rotation(%c: !kv.cache<layers = 1, kv_heads = 4, head_dim = 64, block_size = 16, key_type = q8_0, value_type = q8_0, key_rotation = 48>)

// -----

// expected-error @+1 {{a value rotation must be 0 or a power of two dividing head_dim 64, got 128}}
func.func private @rotation_past_head(%c: !kv.cache<layers = 1, kv_heads = 4, head_dim = 64, block_size = 16, key_type = q8_0, value_type = q8_0, value_rotation = 128>)

// -----

// expected-error @+2 {{expected ::kvjit::kv::CacheElement to be one of: f32, f16, bf16, q8_0, q4_0, f8_e4m3}}
// expected-error @+1 {{failed to parse Kv_CacheType parameter 'key_type'}}
func.func @bad_element(%c: !kv.cache<layers = 1, kv_heads = 4, head_dim = 8, block_size = 16, key_type = i8, value_type = f32>)

// -----

!cache = !kv.cache<layers = 2, kv_heads = 4, head_dim = 8, block_size = 16, key_type = f32, value_type = f32>
func.func @write_layer(%k: tensor<?x4x8xf32>, %slots: tensor<?xi32>, %cache: !cache) {
  // expected-error @+1 {{'kv.write' op layer 2 is outside the cache's 2 layers}}
  kv.write %k, %k into %cache[2] at %slots : tensor<?x4x8xf32>, tensor<?x4x8xf32>, tensor<?xi32>, !cache
  return
}

// -----

!cache = !kv.cache<layers = 2, kv_heads = 4, head_dim = 8, block_size = 16, key_type = f32, value_type = f32>
func.func @write_heads(%k: tensor<?x2x8xf32>, %slots: tensor<?xi32>, %cache: !cache) {
  // expected-error @+1 {{'kv.write' op key has 2 heads but the cache has 4}}
  kv.write %k, %k into %cache[0] at %slots : tensor<?x2x8xf32>, tensor<?x2x8xf32>, tensor<?xi32>, !cache
  return
}

// -----

!cache = !kv.cache<layers = 2, kv_heads = 4, head_dim = 8, block_size = 16, key_type = f32, value_type = f32>
func.func @write_head_dim(%k: tensor<?x4x16xf32>, %slots: tensor<?xi32>, %cache: !cache) {
  // expected-error @+1 {{'kv.write' op key head_dim 16 differs from the cache's 8}}
  kv.write %k, %k into %cache[0] at %slots : tensor<?x4x16xf32>, tensor<?x4x16xf32>, tensor<?xi32>, !cache
  return
}

// -----

!cache = !kv.cache<layers = 2, kv_heads = 4, head_dim = 8, block_size = 16, key_type = f32, value_type = f32>
func.func @write_slots(%k: tensor<3x4x8xf32>, %slots: tensor<2xi32>, %cache: !cache) {
  // expected-error @+1 {{'kv.write' op slot_mapping must have one entry per token}}
  kv.write %k, %k into %cache[0] at %slots : tensor<3x4x8xf32>, tensor<3x4x8xf32>, tensor<2xi32>, !cache
  return
}

// -----

!cache = !kv.cache<layers = 2, kv_heads = 4, head_dim = 8, block_size = 16, key_type = f32, value_type = f32>
func.func @attention_heads(%q: tensor<?x6x8xf32>, %p: tensor<?xi32>, %t: tensor<?x?xi32>, %cache: !cache) {
  // expected-error @+1 {{'kv.attention' op query heads (6) must be a multiple of the cache's 4 KV heads}}
  %o = kv.attention %q, %cache[0] positions %p seq_starts %p context_lens %p block_tables %t {scale = 1.0 : f32} : (tensor<?x6x8xf32>, !cache, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?x?xi32>) -> tensor<?x6x8xf32>
  return
}

// -----

!cache = !kv.cache<layers = 2, kv_heads = 4, head_dim = 8, block_size = 16, key_type = f32, value_type = f32>
func.func @attention_positions(%q: tensor<3x8x8xf32>, %p: tensor<2xi32>, %s: tensor<?xi32>, %t: tensor<?x?xi32>, %cache: !cache) {
  // expected-error @+1 {{'kv.attention' op positions must have one entry per query token}}
  %o = kv.attention %q, %cache[0] positions %p seq_starts %s context_lens %s block_tables %t {scale = 1.0 : f32} : (tensor<3x8x8xf32>, !cache, tensor<2xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?x?xi32>) -> tensor<3x8x8xf32>
  return
}

// -----

!cache = !kv.cache<layers = 2, kv_heads = 4, head_dim = 8, block_size = 16, key_type = f32, value_type = f32>
func.func @attention_result(%q: tensor<?x8x8xf32>, %p: tensor<?xi32>, %t: tensor<?x?xi32>, %cache: !cache) {
  // expected-error @+1 {{'kv.attention' op result type must equal the query's type 'tensor<?x8x8xf32>'}}
  %o = kv.attention %q, %cache[0] positions %p seq_starts %p context_lens %p block_tables %t {scale = 1.0 : f32} : (tensor<?x8x8xf32>, !cache, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?x?xi32>) -> tensor<?x4x8xf32>
  return
}

// -----

!cache = !kv.cache<layers = 2, kv_heads = 4, head_dim = 8, block_size = 16, key_type = f32, value_type = f32>
func.func @attention_window(%q: tensor<?x8x8xf32>, %p: tensor<?xi32>, %t: tensor<?x?xi32>, %cache: !cache) {
  // expected-error @+1 {{'kv.attention' op window must be positive, got 0}}
  %o = kv.attention %q, %cache[0] positions %p seq_starts %p context_lens %p block_tables %t {scale = 1.0 : f32, window = 0 : i64} : (tensor<?x8x8xf32>, !cache, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?x?xi32>) -> tensor<?x8x8xf32>
  return
}

// -----

// expected-error @+1 {{KV layout sizes and strides must be positive}}
func.func @empty_pool() attributes {kv.layout = #kv.layout<block_size = 16, key_type = f16, value_type = f16, block_bytes = 4096, blocks = 0, layer_stride_bytes = 2048, value_offset_bytes = 1024, key_slot_stride_bytes = 64, value_slot_stride_bytes = 64>} {
  return
}


// -----

!cache = !kv.cache<layers = 2, kv_heads = 4, head_dim = 8, block_size = 16, key_type = f32, value_type = f32>
func.func @attention_softcap(%q: tensor<?x8x8xf32>, %p: tensor<?xi32>, %t: tensor<?x?xi32>, %cache: !cache) {
  // expected-error @+1 {{'kv.attention' op softcap must be positive and finite, got -3}}
  %o = kv.attention %q, %cache[0] positions %p seq_starts %p context_lens %p block_tables %t {scale = 1.0 : f32, softcap = -3.0 : f32} : (tensor<?x8x8xf32>, !cache, tensor<?xi32>, tensor<?xi32>, tensor<?xi32>, tensor<?x?xi32>) -> tensor<?x8x8xf32>
  return
}
