// RUN: kvjit-opt %s --split-input-file --verify-diagnostics

// expected-error @+1 {{'tfm.param' op weight @w must have a static shape}}
tfm.param @w : tensor<?x64xf32> storage <f32>

// -----

// expected-error @+1 {{'tfm.param' op weight @w stored as q4_0 needs rows of a multiple of 32 elements, got 48}}
tfm.param @w : tensor<64x48xf32> storage <q4_0>

// -----

// expected-error @+1 {{'tfm.param' op weight @w stored as q6_k needs rows of a multiple of 256 elements, got 128}}
tfm.param @w : tensor<64x128xf32> storage <q6_k>

// -----

// expected-error @+1 {{'tfm.param' op weight @w in layout rows_interleaved8 must be stored in 32-element blocks (q8_0, q4_0, q4_1, q5_0, q5_1), got q4_k}}
tfm.param @w : tensor<64x256xf32> storage <q4_k> layout <rows_interleaved8>

// -----

// expected-error @+1 {{'tfm.param' op weight @w in layout rows_interleaved8 must be stored in 32-element blocks (q8_0, q4_0, q4_1, q5_0, q5_1), got f32}}
tfm.param @w : tensor<64x64xf32> storage <f32> layout <rows_interleaved8>

// -----

// expected-error @+1 {{'tfm.param' op weight @w in layout rows_interleaved8 must be a matrix of a multiple of 8 rows, got 'tensor<12x64xf32>'}}
tfm.param @w : tensor<12x64xf32> storage <q8_0> layout <rows_interleaved8>

// -----

// expected-error @+1 {{'tfm.param' op weight @w in layout rows_interleaved8 must be a matrix of a multiple of 8 rows, got 'tensor<64xf32>'}}
tfm.param @w : tensor<64xf32> storage <q8_0> layout <rows_interleaved8>

// -----

func.func @missing_param() -> tensor<4xf32> {
  // expected-error @+1 {{'tfm.weight' op refers to @nowhere, which is no tfm.param}}
  %w = tfm.weight @nowhere : tensor<4xf32>
  return %w : tensor<4xf32>
}

// -----

tfm.param @w : tensor<4xf32> storage <f32>
func.func @weight_type_mismatch() -> tensor<8xf32> {
  // expected-error @+1 {{'tfm.weight' op result type 'tensor<8xf32>' differs from @w's declared type 'tensor<4xf32>'}}
  %w = tfm.weight @w : tensor<8xf32>
  return %w : tensor<8xf32>
}

// -----

func.func @embedding_table_rank(%t: tensor<512xf32>, %ids: tensor<?xi32>) {
  // expected-error @+1 {{'tfm.embedding' op table must have rank 2, got 'tensor<512xf32>'}}
  %x = tfm.embedding %t, %ids : (tensor<512xf32>, tensor<?xi32>) -> tensor<?x64xf32>
  return
}

// -----

func.func @embedding_width(%t: tensor<512x64xf32>, %ids: tensor<?xi32>) {
  // expected-error @+1 {{'tfm.embedding' op result type 'tensor<?x32xf32>' does not match the expected shape [?x64]}}
  %x = tfm.embedding %t, %ids : (tensor<512x64xf32>, tensor<?xi32>) -> tensor<?x32xf32>
  return
}

// -----

func.func @embedding_ids(%t: tensor<512x64xf32>, %ids: tensor<?xf32>) {
  // expected-error @+1 {{'tfm.embedding' op operand #1 must be 1D tensor of 32-bit signless integer values}}
  %x = tfm.embedding %t, %ids : (tensor<512x64xf32>, tensor<?xf32>) -> tensor<?x64xf32>
  return
}

// -----

func.func @linear_features(%x: tensor<?x32xf32>, %w: tensor<64x64xf32>) {
  // expected-error @+1 {{'tfm.linear' op weight operand has 64 input features but the input operand has 32}}
  %y = tfm.linear %x, %w : (tensor<?x32xf32>, tensor<64x64xf32>) -> tensor<?x64xf32>
  return
}

// -----

func.func @linear_bias(%x: tensor<?x64xf32>, %w: tensor<16x64xf32>, %b: tensor<8xf32>) {
  // expected-error @+1 {{'tfm.linear' op bias operand has 8 elements but the weight has 16 output features}}
  %y = tfm.linear %x, %w bias %b : (tensor<?x64xf32>, tensor<16x64xf32>, tensor<8xf32>) -> tensor<?x16xf32>
  return
}

// -----

func.func @linear_result(%x: tensor<?x64xf32>, %w: tensor<16x64xf32>) {
  // expected-error @+1 {{'tfm.linear' op result type 'tensor<?x64xf32>' does not match the expected shape [?x16]}}
  %y = tfm.linear %x, %w : (tensor<?x64xf32>, tensor<16x64xf32>) -> tensor<?x64xf32>
  return
}

// -----

func.func @linear_rank(%x: tensor<?x4x16xf32>, %w: tensor<16x64xf32>) {
  // expected-error @+1 {{'tfm.linear' op input must have rank 2, got 'tensor<?x4x16xf32>'}}
  %y = tfm.linear %x, %w : (tensor<?x4x16xf32>, tensor<16x64xf32>) -> tensor<?x16xf32>
  return
}

// -----

func.func @rms_norm_weight(%x: tensor<?x64xf32>, %w: tensor<32xf32>) {
  // expected-error @+1 {{'tfm.rms_norm' op weight operand has 32 elements but the input has 64 features}}
  %y = tfm.rms_norm %x, %w {epsilon = 1.0e-5 : f32} : tensor<?x64xf32>, tensor<32xf32>
  return
}

// -----

func.func @rms_norm_epsilon(%x: tensor<?x64xf32>, %w: tensor<64xf32>) {
  // expected-error @+1 {{'tfm.rms_norm' op epsilon must be >= 0}}
  %y = tfm.rms_norm %x, %w {epsilon = -1.0 : f32} : tensor<?x64xf32>, tensor<64xf32>
  return
}

// -----

func.func @layer_norm_bias(%x: tensor<?x64xf32>, %w: tensor<64xf32>, %b: tensor<63xf32>) {
  // expected-error @+1 {{'tfm.layer_norm' op bias operand has 63 elements but the input has 64 features}}
  %y = tfm.layer_norm %x, %w bias %b {epsilon = 1.0e-5 : f32} : tensor<?x64xf32>, tensor<64xf32>, tensor<63xf32>
  return
}

// -----

func.func @rope_rank(%x: tensor<?x64xf32>, %p: tensor<?xi32>) {
  // expected-error @+1 {{'tfm.rope' op input must have rank 3, got 'tensor<?x64xf32>'}}
  %y = tfm.rope %x, %p {style = #tfm.rope_style<neox>, theta = 10000.0 : f32} : tensor<?x64xf32>, tensor<?xi32>
  return
}

// -----

func.func @rope_positions(%x: tensor<4x8x8xf32>, %p: tensor<5xi32>) {
  // expected-error @+1 {{'tfm.rope' op positions operand has 5 entries but the input has 4 tokens}}
  %y = tfm.rope %x, %p {style = #tfm.rope_style<neox>, theta = 10000.0 : f32} : tensor<4x8x8xf32>, tensor<5xi32>
  return
}

// -----

func.func @rope_rotary_dim(%x: tensor<?x8x8xf32>, %p: tensor<?xi32>) {
  // expected-error @+1 {{'tfm.rope' op rotary_dim must be even and in (0, 8], got 3}}
  %y = tfm.rope %x, %p {style = #tfm.rope_style<neox>, theta = 10000.0 : f32, rotary_dim = 3 : i64} : tensor<?x8x8xf32>, tensor<?xi32>
  return
}

// -----

func.func @rope_theta(%x: tensor<?x8x8xf32>, %p: tensor<?xi32>) {
  // expected-error @+1 {{'tfm.rope' op theta must be positive}}
  %y = tfm.rope %x, %p {style = #tfm.rope_style<neox>, theta = 0.0 : f32} : tensor<?x8x8xf32>, tensor<?xi32>
  return
}

// -----

func.func @rope_freq_factors_count(%x: tensor<?x8x8xf32>, %p: tensor<?xi32>) {
  // expected-error @+1 {{'tfm.rope' op freq_factors has 3 entries but rotary_dim 8 has 4 pairs}}
  %y = tfm.rope %x, %p {style = #tfm.rope_style<neox>, theta = 10000.0 : f32, freq_factors = array<f32: 1.0, 2.0, 3.0>} : tensor<?x8x8xf32>, tensor<?xi32>
  return
}

// -----

func.func @rope_freq_factors_zero(%x: tensor<?x8x8xf32>, %p: tensor<?xi32>) {
  // expected-error @+1 {{'tfm.rope' op freq_factors must be positive and finite, got 0}}
  %y = tfm.rope %x, %p {style = #tfm.rope_style<neox>, theta = 10000.0 : f32, freq_factors = array<f32: 1.0, 2.0, 0.0, 8.0>} : tensor<?x8x8xf32>, tensor<?xi32>
  return
}

// -----

func.func @rope_freq_factors_and_scaling(%x: tensor<?x8x8xf32>, %p: tensor<?xi32>) {
  // expected-error @+1 {{'tfm.rope' op takes freq_factors or scaling, not both}}
  %y = tfm.rope %x, %p {style = #tfm.rope_style<neox>, theta = 10000.0 : f32, freq_factors = array<f32: 1.0, 2.0, 4.0, 8.0>, scaling = #tfm.rope_scaling<kind = linear, factor = 2.0>} : tensor<?x8x8xf32>, tensor<?xi32>
  return
}

// -----

func.func @rope_scaling(%x: tensor<?x8x8xf32>, %p: tensor<?xi32>) {
  // expected-error @+1 {{llama3 rope scaling needs a positive original_context}}
  %y = tfm.rope %x, %p {style = #tfm.rope_style<neox>, theta = 10000.0 : f32, scaling = #tfm.rope_scaling<kind = llama3, factor = 8.0>} : tensor<?x8x8xf32>, tensor<?xi32>
  return
}

// -----

func.func @rope_scaling_factor(%x: tensor<?x8x8xf32>, %p: tensor<?xi32>) {
  // expected-error @+1 {{rope scaling factor must be positive, got 0}}
  %y = tfm.rope %x, %p {style = #tfm.rope_style<neox>, theta = 10000.0 : f32, scaling = #tfm.rope_scaling<kind = linear, factor = 0.0>} : tensor<?x8x8xf32>, tensor<?xi32>
  return
}

// -----

func.func @matmul_contraction(%a: tensor<8x?x8xf32>, %b: tensor<8x4x?xf32>) {
  // expected-error @+1 {{'tfm.matmul' op contracted dimensions differ: lhs has 8 columns, rhs has 4 rows}}
  %c = tfm.matmul %a, %b : (tensor<8x?x8xf32>, tensor<8x4x?xf32>) -> tensor<8x?x?xf32>
  return
}

// -----

func.func @matmul_batch(%a: tensor<8x?x8xf32>, %b: tensor<4x8x?xf32>) {
  // expected-error @+1 {{'tfm.matmul' op batch dimension 0 differs: 8 vs 4}}
  %c = tfm.matmul %a, %b : (tensor<8x?x8xf32>, tensor<4x8x?xf32>) -> tensor<8x?x?xf32>
  return
}

// -----

func.func @matmul_rank(%a: tensor<8xf32>, %b: tensor<8x4xf32>) {
  // expected-error @+1 {{'tfm.matmul' op operands must have one rank of at least 2}}
  %c = tfm.matmul %a, %b : (tensor<8xf32>, tensor<8x4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @matmul_result(%a: tensor<2x8xf32>, %b: tensor<8x4xf32>) {
  // expected-error @+1 {{'tfm.matmul' op result type 'tensor<2x8xf32>' does not match the expected shape [2x4]}}
  %c = tfm.matmul %a, %b : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @transpose_permutation(%x: tensor<2x3x4xf32>) {
  // expected-error @+1 {{'tfm.transpose' op permutation is not a permutation of [0, 3)}}
  %y = tfm.transpose %x [0, 0, 2] : (tensor<2x3x4xf32>) -> tensor<2x2x4xf32>
  return
}

// -----

func.func @transpose_length(%x: tensor<2x3x4xf32>) {
  // expected-error @+1 {{'tfm.transpose' op permutation has 2 entries but the input has rank 3}}
  %y = tfm.transpose %x [1, 0] : (tensor<2x3x4xf32>) -> tensor<3x2x4xf32>
  return
}

// -----

func.func @transpose_result(%x: tensor<2x3x4xf32>) {
  // expected-error @+1 {{'tfm.transpose' op result type 'tensor<2x3x4xf32>' does not match the expected shape [3x2x4]}}
  %y = tfm.transpose %x [1, 0, 2] : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  return
}

// -----

func.func @reshape_count(%x: tensor<?x64xf32>) {
  // expected-error @+1 {{'tfm.reshape' op changes the element count: 'tensor<?x64xf32>' cannot become 'tensor<?x8x7xf32>'}}
  %y = tfm.reshape %x : (tensor<?x64xf32>) -> tensor<?x8x7xf32>
  return
}

// -----

func.func @reshape_dynamic(%x: tensor<?x64xf32>) {
  // expected-error @+1 {{'tfm.reshape' op input and result must have the same single dynamic dimension or none}}
  %y = tfm.reshape %x : (tensor<?x64xf32>) -> tensor<4x16xf32>
  return
}

// -----

func.func @repeat_axis(%x: tensor<?x4x8xf32>) {
  // expected-error @+1 {{'tfm.repeat' op axis 3 is out of range for rank 3}}
  %y = tfm.repeat %x {axis = 3 : i64, repeats = 2 : i64} : (tensor<?x4x8xf32>) -> tensor<?x4x8xf32>
  return
}

// -----

func.func @repeat_result(%x: tensor<?x4x8xf32>) {
  // expected-error @+1 {{'tfm.repeat' op result type 'tensor<?x4x8xf32>' does not match the expected shape [?x8x8]}}
  %y = tfm.repeat %x {axis = 1 : i64, repeats = 2 : i64} : (tensor<?x4x8xf32>) -> tensor<?x4x8xf32>
  return
}

// -----

func.func @repeat_count(%x: tensor<?x4x8xf32>) {
  // expected-error @+1 {{'tfm.repeat' op repeats must be at least 1, got 0}}
  %y = tfm.repeat %x {axis = 1 : i64, repeats = 0 : i64} : (tensor<?x4x8xf32>) -> tensor<?x4x8xf32>
  return
}

// -----

func.func @softmax_axis(%x: tensor<?x64xf32>) {
  // expected-error @+1 {{'tfm.softmax' op axis 2 is out of range for rank 2}}
  %y = tfm.softmax %x {axis = 2 : i64} : tensor<?x64xf32>
  return
}

// -----

func.func @causal_mask_rank(%x: tensor<64xf32>) {
  // expected-error @+1 {{'tfm.causal_mask' op input must be [..., queries, keys], got 'tensor<64xf32>'}}
  %y = tfm.causal_mask %x : tensor<64xf32>
  return
}

// -----

func.func @causal_mask_window(%x: tensor<4x?x?xf32>) {
  // expected-error @+1 {{'tfm.causal_mask' op window must be positive, got 0}}
  %y = tfm.causal_mask %x {window = 0 : i64} : tensor<4x?x?xf32>
  return
}

// -----

func.func @add_shapes(%a: tensor<?x64xf32>, %b: tensor<?x32xf32>) {
  // expected-error @+1 {{'tfm.add' op requires the same type for all operands and results}}
  %c = "tfm.add"(%a, %b) : (tensor<?x64xf32>, tensor<?x32xf32>) -> tensor<?x64xf32>
  return
}

// -----

func.func @activation_element_type(%a: tensor<?x64xf16>) {
  // expected-error @+1 {{'tfm.silu' op operand #0 must be ranked tensor of 32-bit float values}}
  %c = tfm.silu %a : tensor<?x64xf16>
  return
}

// -----

func.func @softmax_negative_axis(%x: tensor<?x64xf32>) {
  // expected-error @+1 {{'tfm.softmax' op axis -3 is out of range for rank 2}}
  %y = tfm.softmax %x {axis = -3 : i64} : tensor<?x64xf32>
  return
}

// -----

func.func @attention_heads(%q: tensor<?x6x8xf32>, %k: tensor<?x4x8xf32>, %v: tensor<?x4x8xf32>) {
  // expected-error @+1 {{'tfm.attention' op query heads (6) must be a static multiple of key heads (4)}}
  %o = tfm.attention %q, %k, %v {scale = 1.0 : f32} : (tensor<?x6x8xf32>, tensor<?x4x8xf32>, tensor<?x4x8xf32>) -> tensor<?x6x8xf32>
  return
}

// -----

func.func @attention_head_dim(%q: tensor<?x8x16xf32>, %k: tensor<?x4x8xf32>, %v: tensor<?x4x8xf32>) {
  // expected-error @+1 {{'tfm.attention' op query head_dim 16 differs from key head_dim 8}}
  %o = tfm.attention %q, %k, %v {scale = 1.0 : f32} : (tensor<?x8x16xf32>, tensor<?x4x8xf32>, tensor<?x4x8xf32>) -> tensor<?x8x16xf32>
  return
}

// -----

func.func @attention_key_value(%q: tensor<?x8x8xf32>, %k: tensor<?x4x8xf32>, %v: tensor<?x2x8xf32>) {
  // expected-error @+1 {{'tfm.attention' op key and value must have one type}}
  %o = tfm.attention %q, %k, %v {scale = 1.0 : f32} : (tensor<?x8x8xf32>, tensor<?x4x8xf32>, tensor<?x2x8xf32>) -> tensor<?x8x8xf32>
  return
}

// -----

func.func @attention_window(%q: tensor<?x8x8xf32>, %k: tensor<?x4x8xf32>) {
  // expected-error @+1 {{'tfm.attention' op window must be positive, got -4}}
  %o = tfm.attention %q, %k, %k {causal, scale = 1.0 : f32, window = -4 : i64} : (tensor<?x8x8xf32>, tensor<?x4x8xf32>, tensor<?x4x8xf32>) -> tensor<?x8x8xf32>
  return
}

// -----

func.func @attention_window_not_causal(%q: tensor<?x8x8xf32>, %k: tensor<?x4x8xf32>) {
  // expected-error @+1 {{'tfm.attention' op has a window but is not causal}}
  %o = tfm.attention %q, %k, %k {scale = 1.0 : f32, window = 16 : i64} : (tensor<?x8x8xf32>, tensor<?x4x8xf32>, tensor<?x4x8xf32>) -> tensor<?x8x8xf32>
  return
}

// -----

func.func @attention_softcap_zero(%q: tensor<?x8x8xf32>, %k: tensor<?x4x8xf32>) {
  // expected-error @+1 {{'tfm.attention' op softcap must be positive and finite, got 0}}
  %o = tfm.attention %q, %k, %k {causal, scale = 1.0 : f32, softcap = 0.0 : f32} : (tensor<?x8x8xf32>, tensor<?x4x8xf32>, tensor<?x4x8xf32>) -> tensor<?x8x8xf32>
  return
}

// -----

func.func @attention_softcap_infinite(%q: tensor<?x8x8xf32>, %k: tensor<?x4x8xf32>) {
  // expected-error @+1 {{'tfm.attention' op softcap must be positive and finite, got INF}}
  %o = tfm.attention %q, %k, %k {causal, scale = 1.0 : f32, softcap = 0x7F800000 : f32} : (tensor<?x8x8xf32>, tensor<?x4x8xf32>, tensor<?x4x8xf32>) -> tensor<?x8x8xf32>
  return
}

// -----

func.func @gather_rows_width(%x: tensor<?x64xf32>, %rows: tensor<?xi32>) {
  // expected-error @+1 {{'tfm.gather_rows' op result type 'tensor<?x32xf32>' does not match the expected shape [?x64]}}
  %g = tfm.gather_rows %x, %rows : (tensor<?x64xf32>, tensor<?xi32>) -> tensor<?x32xf32>
  return
}

// -----

tfm.param @a : tensor<16x8xf32> storage <f32>
tfm.param @b : tensor<16x8xf32> storage <f16>
// expected-error @+1 {{'tfm.param' op concatenates @b ('tensor<16x8xf32>' storage f16) into rows of 8 stored as f32}}
tfm.param @ab : tensor<32x8xf32> storage <f32> concat [@a, @b]

// -----

tfm.param @a : tensor<16x8xf32> storage <f32>
tfm.param @b : tensor<16x8xf32> storage <f32>
// expected-error @+1 {{'tfm.param' op has 24 rows but its parts have 32}}
tfm.param @ab : tensor<24x8xf32> storage <f32> concat [@a, @b]

// -----

tfm.param @a : tensor<16x8xf32> storage <f32>
// expected-error @+1 {{'tfm.param' op concatenates @missing, which is no tfm.param}}
tfm.param @ab : tensor<32x8xf32> storage <f32> concat [@a, @missing]

// -----

// expected-error @+1 {{'tfm.param' op shifts @missing, which is no tfm.param}}
tfm.param @w.plus_one : tensor<8xf32> storage <f32> shifted @missing by 1.0

// -----

tfm.param @w : tensor<16xf32> storage <f32>
// expected-error @+1 {{'tfm.param' op shifts @w of type 'tensor<16xf32>' into 'tensor<8xf32>'; the shapes must match}}
tfm.param @w.plus_one : tensor<8xf32> storage <f32> shifted @w by 1.0

// -----

tfm.param @w : tensor<8xf32> storage <bf16>
// expected-error @+1 {{'tfm.param' op weight @w.plus_one is shifted in f32, so its storage must be f32, got bf16}}
tfm.param @w.plus_one : tensor<8xf32> storage <bf16> shifted @w by 1.0

// -----

tfm.param @w : tensor<8xf32> storage <f32>
tfm.param @w.plus_one : tensor<8xf32> storage <f32> shifted @w by 1.0
// expected-error @+1 {{'tfm.param' op shifts @w.plus_one, which the compiler makes: the source must be a model weight}}
tfm.param @w.plus_two : tensor<8xf32> storage <f32> shifted @w.plus_one by 1.0

// -----

tfm.param @a : tensor<16x8xf32> storage <f32>
// expected-error @+1 {{'tfm.param' op weight @b is either shifted or a concatenation, not both}}
tfm.param @b : tensor<16x8xf32> storage <f32> concat [@a] shifted @a by 1.0

// -----

tfm.param @w : tensor<8xf32> storage <f32>
// expected-error @+1 {{'tfm.param' op weight @w.plus_one needs both 'shifted' and 'shift' or neither}}
tfm.param @w.plus_one : tensor<8xf32> storage <f32> {shift = 1.0 : f32}

// -----

tfm.param @w : tensor<8xf32> storage <f32>
// expected-error @+1 {{'tfm.param' op weight @w.plus_inf needs a finite shift}}
tfm.param @w.plus_inf : tensor<8xf32> storage <f32> shifted @w by 0x7F800000

// -----

func.func @slice_past_the_end(%x: tensor<?x16xf32>) -> tensor<?x8xf32> {
  // expected-error @+1 {{'tfm.slice_columns' op columns [12, 20) are not within the input's 16 features}}
  %s = tfm.slice_columns %x {offset = 12 : i64, size = 8 : i64} : (tensor<?x16xf32>) -> tensor<?x8xf32>
  return %s : tensor<?x8xf32>
}

// -----

func.func @slice_of_wrong_width(%x: tensor<?x16xf32>) -> tensor<?x4xf32> {
  // expected-error @+1 {{'tfm.slice_columns' op result type 'tensor<?x4xf32>' does not match the expected shape [?x8]}}
  %s = tfm.slice_columns %x {offset = 0 : i64, size = 8 : i64} : (tensor<?x16xf32>) -> tensor<?x4xf32>
  return %s : tensor<?x4xf32>
}
