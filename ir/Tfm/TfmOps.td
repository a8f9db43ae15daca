#ifndef KVJIT_IR_TFM_TFMOPS_TD
#define KVJIT_IR_TFM_TFMOPS_TD

include "ir/Tfm/TfmDialect.td"
include "ir/Tfm/TfmAttrs.td"
include "ir/Tfm/TfmTraits.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

// Activations are f32 tensors; token counts are dynamic.
def Tfm_Activation : RankedTensorOf<[F32]>;
def Tfm_Vector : 1DTensorOf<[F32]>;
def Tfm_TokenIds : 1DTensorOf<[I32]>;

//===----------------------------------------------------------------------===//
// Weights
//===----------------------------------------------------------------------===//

def Tfm_ParamOp : Tfm_Op<"param", [Symbol, HasParent<"::mlir::ModuleOp">,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "declares a weight of the model";
  let description = [{
    One weight, by its name in the model file. `type` is its logical shape
    with f32 elements; `storage` is how its elements are stored (a GGUF tensor
    type), so passes and codegen can pick kernels that read the blocks
    directly.

    ```mlir
    tfm.param @blk.0.attn_q.weight : tensor<64x64xf32> storage <q4_1>
    ```

    With `concat`, the weight is not in the model file under its own name
    but made by the compiler: the rows of the listed params, in order, one
    after the other (`fuse-projections` writes them). They are matrices of
    one storage type and one row length, and their row counts add up to
    this one's. Block-quantized rows are independent, so the concatenation
    is byte for byte the rows' own bytes.

    ```mlir
    tfm.param @blk.0.ffn_gate_up.weight : tensor<344x64xf32> storage <q4_1>
        concat [@blk.0.ffn_gate.weight, @blk.0.ffn_up.weight]
    ```

    With `shifted`, the weight is made by the compiler too: `shift` plus
    each element of the named param, decoded to f32 and added in f32, stored
    as f32. The source is a weight of the model file of the same shape.
    Gemma's Hugging Face checkpoints store each RMSNorm weight as w for a
    scale of 1 + w (transformers computes `1.0 + weight.float()`), which
    llama.cpp's converter folds into its GGUFs; deriving the scale here keeps
    the norm one op for every model.

    ```mlir
    tfm.param @blk.0.attn_norm.weight.plus_one : tensor<64xf32> storage <f32>
        shifted @blk.0.attn_norm.weight by 1.000000e+00
    ```

    With `sliced`, the weight is a contiguous part of another param along
    one axis: rows (`axis 0`) or columns (`axis 1`) `from` the given index,
    as many as this param's type has. `shard-tensor-parallel` gives each
    rank its shard this way. A slice of rows of a model weight is read in
    place from the model file; a slice of columns, whose rows lie apart, is
    made by the compiler. Columns of a block-quantized weight begin and end
    on block boundaries, or the slice is stored as f32: its values
    dequantized, exactly. The source is a model weight, of the same storage
    type (or f32, for columns) and rank, with this param's extent on the
    other axis.

    ```mlir
    tfm.param @blk.0.ffn_down.weight.rank1 : tensor<64x86xf32> storage <f32>
        sliced @blk.0.ffn_down.weight axis 1 from 86
    ```

    `layout` says how the executable orders the weight's blocks (absent:
    GGUF's rows, read in place from the model file). `choose-weight-layouts`
    sets `rows_interleaved8` on matrices of a 32-element block type (q8_0,
    q4_0, q4_1, q5_0, q5_1) with a multiple of 8 rows that only linears
    read; the executable writer repacks them into the sidecar. The values
    are the same, and so are the kernels' results (docs/numerics.md).

    ```mlir
    tfm.param @blk.0.ffn_down.weight : tensor<64x172xf32> storage <q4_1>
        layout <rows_interleaved8>
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name,
                       TypeAttrOf<Tfm_Activation>:$type,
                       Tfm_StorageTypeAttr:$storage,
                       OptionalAttr<FlatSymbolRefArrayAttr>:$concat,
                       OptionalAttr<FlatSymbolRefAttr>:$shifted,
                       OptionalAttr<F32Attr>:$shift,
                       OptionalAttr<Tfm_WeightLayoutAttr>:$layout,
                       OptionalAttr<FlatSymbolRefAttr>:$sliced,
                       OptionalAttr<I64Attr>:$slice_axis,
                       OptionalAttr<I64Attr>:$slice_from);
  let assemblyFormat = [{
    $sym_name `:` $type `storage` $storage (`layout` $layout^)? (`concat` $concat^)?
    (`shifted` $shifted^ `by` $shift)? (`sliced` $sliced^ `axis` $slice_axis `from` $slice_from)?
    attr-dict
  }];
  let builders = [
    // A weight of the model file.
    OpBuilder<(ins "::mlir::StringAttr":$sym_name, "::mlir::TypeAttr":$type,
                   "::kvjit::tfm::StorageTypeAttr":$storage), [{
      build($_builder, $_state, sym_name, type, storage, /*concat=*/nullptr,
            /*shifted=*/nullptr, /*shift=*/nullptr, /*layout=*/nullptr, /*sliced=*/nullptr,
            /*slice_axis=*/nullptr, /*slice_from=*/nullptr);
    }]>,
    // The rows of `concat`'s params, one after the other.
    OpBuilder<(ins "::mlir::StringAttr":$sym_name, "::mlir::TypeAttr":$type,
                   "::kvjit::tfm::StorageTypeAttr":$storage, "::mlir::ArrayAttr":$concat), [{
      build($_builder, $_state, sym_name, type, storage, concat, /*shifted=*/nullptr,
            /*shift=*/nullptr, /*layout=*/nullptr, /*sliced=*/nullptr, /*slice_axis=*/nullptr,
            /*slice_from=*/nullptr);
    }]>,
    // Any weight of GGUF's rows: one of the model file, a concatenation or a
    // shifted weight.
    OpBuilder<(ins "::mlir::StringAttr":$sym_name, "::mlir::TypeAttr":$type,
                   "::kvjit::tfm::StorageTypeAttr":$storage, "::mlir::ArrayAttr":$concat,
                   "::mlir::FlatSymbolRefAttr":$shifted, "::mlir::FloatAttr":$shift), [{
      build($_builder, $_state, sym_name, type, storage, concat, shifted, shift,
            /*layout=*/nullptr, /*sliced=*/nullptr, /*slice_axis=*/nullptr, /*slice_from=*/nullptr);
    }]>,
    // `type`'s extent of `source`'s rows (axis 0) or columns (axis 1), from
    // `from`.
    OpBuilder<(ins "::mlir::StringAttr":$sym_name, "::mlir::TypeAttr":$type,
                   "::kvjit::tfm::StorageTypeAttr":$storage, "::mlir::FlatSymbolRefAttr":$sliced,
                   "int64_t":$axis, "int64_t":$from), [{
      build($_builder, $_state, sym_name, type, storage, /*concat=*/nullptr, /*shifted=*/nullptr,
            /*shift=*/nullptr, /*layout=*/nullptr, sliced, $_builder.getI64IntegerAttr(axis),
            $_builder.getI64IntegerAttr(from));
    }]>,
  ];
  let extraClassDeclaration = [{
    // Whether the weight is one of the model file's, read as the model
    // stores it, rather than one the compiler makes from others.
    bool isModelWeight() { return !getConcat() && !getShifted() && !getSliced(); }
  }];
  let hasVerifier = 1;
}

def Tfm_WeightOp : Tfm_Op<"weight", [Pure,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "reads a declared weight";
  let arguments = (ins FlatSymbolRefAttr:$param);
  let results = (outs Tfm_Activation:$result);
  let assemblyFormat = "$param attr-dict `:` type($result)";
}

//===----------------------------------------------------------------------===//
// Layers
//===----------------------------------------------------------------------===//

def Tfm_EmbeddingOp : Tfm_Op<"embedding", [Pure]> {
  let summary = "looks up each token's row of an embedding table";
  let description = [{
    `table` is `[vocab, hidden]`, `tokens` is `[T]`; the result is `[T, hidden]`.
  }];
  let arguments = (ins Tfm_Activation:$table, Tfm_TokenIds:$tokens);
  let results = (outs Tfm_Activation:$result);
  let assemblyFormat = "$table `,` $tokens attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Tfm_LinearOp : Tfm_Op<"linear", [Pure, Tfm_CommutesWithRowGather]> {
  let summary = "x · Wᵀ (+ bias)";
  let description = [{
    `input` is `[T, in]`, `weight` is `[out, in]`, the optional `bias` is
    `[out]`; the result is `[T, out]`.
  }];
  let arguments = (ins Tfm_Activation:$input, Tfm_Activation:$weight,
                       Optional<Tfm_Vector>:$bias);
  let results = (outs Tfm_Activation:$result);
  let assemblyFormat = [{
    $input `,` $weight (`bias` $bias^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Tfm_RmsNormOp : Tfm_Op<"rms_norm", [Pure, AllTypesMatch<["input", "result"]>,
    Tfm_RowWise, Tfm_FusesResidualAdd, Tfm_CommutesWithRowGather]> {
  let summary = "x / sqrt(mean(x²) + epsilon) · weight, over the last dimension";
  let arguments = (ins Tfm_Activation:$input, Tfm_Vector:$weight, F32Attr:$epsilon);
  let results = (outs Tfm_Activation:$result);
  let assemblyFormat = "$input `,` $weight attr-dict `:` type($input) `,` type($weight)";
  let hasVerifier = 1;
}

def Tfm_LayerNormOp : Tfm_Op<"layer_norm", [Pure, AllTypesMatch<["input", "result"]>,
    Tfm_RowWise, Tfm_CommutesWithRowGather]> {
  let summary = "(x - mean) / sqrt(var + epsilon) · weight (+ bias), over the last dimension";
  let arguments = (ins Tfm_Activation:$input, Tfm_Vector:$weight,
                       Optional<Tfm_Vector>:$bias, F32Attr:$epsilon);
  let results = (outs Tfm_Activation:$result);
  let assemblyFormat = [{
    $input `,` $weight (`bias` $bias^)? attr-dict `:` type($input) `,` type($weight) (`,` type($bias)^)?
  }];
  let hasVerifier = 1;
}

def Tfm_RopeOp : Tfm_Op<"rope", [Pure, AllTypesMatch<["input", "result"]>, Tfm_RowWise]> {
  let summary = "rotary position embedding of each head";
  let description = [{
    `input` is `[T, heads, head_dim]`, `positions` is `[T]`. The first
    `rotary_dim` elements of each head (all of them by default) are rotated in
    pairs chosen by `style`; pair i turns by `position · theta^(-2i/rotary_dim)`,
    with frequencies stretched by `scaling` where present. `freq_factors`
    (rotary_dim / 2 positive divisors, llama.cpp's `rope_freqs` tensor)
    divides pair i's angle by factor i instead of a `scaling` rule.
  }];
  let arguments = (ins Tfm_Activation:$input, Tfm_TokenIds:$positions,
                       Tfm_RopeStyleAttr:$style, F32Attr:$theta,
                       OptionalAttr<I64Attr>:$rotary_dim,
                       OptionalAttr<Tfm_RopeScalingAttr>:$scaling,
                       OptionalAttr<DenseF32ArrayAttr>:$freq_factors);
  let results = (outs Tfm_Activation:$result);
  let assemblyFormat = "$input `,` $positions attr-dict `:` type($input) `,` type($positions)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Tensor algebra
//===----------------------------------------------------------------------===//

def Tfm_MatmulOp : Tfm_Op<"matmul", [Pure]> {
  let summary = "batched matrix product [..., M, K] · [..., K, N] → [..., M, N]";
  let arguments = (ins Tfm_Activation:$lhs, Tfm_Activation:$rhs);
  let results = (outs Tfm_Activation:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Tfm_TransposeOp : Tfm_Op<"transpose", [Pure]> {
  let summary = "permutes dimensions: result dim i is input dim permutation[i]";
  let arguments = (ins Tfm_Activation:$input, DenseI64ArrayAttr:$permutation);
  let results = (outs Tfm_Activation:$result);
  let assemblyFormat = "$input $permutation attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Tfm_ReshapeOp : Tfm_Op<"reshape", [Pure]> {
  let summary = "reinterprets a row-major tensor with another shape";
  let description = [{
    The element count is preserved. With a dynamic dimension on each side
    (the token count), the static dimensions' products must match, so that
    the dynamic dimension carries over unchanged.
  }];
  let arguments = (ins Tfm_Activation:$input);
  let results = (outs Tfm_Activation:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Tfm_SliceColumnsOp : Tfm_Op<"slice_columns", [Pure]> {
  let summary = "columns [offset, offset + size) of each row of a [rows, features] tensor";
  let description = [{
    `result[r, c] = input[r, offset + c]`. `fuse-projections` splits the
    result of a fused linear back into its projections with it. Codegen
    reads it in place, as a view of the wider rows (their stride stays the
    input's row length), so a split copies nothing.
  }];
  let arguments = (ins Tfm_Activation:$input, I64Attr:$offset, I64Attr:$size);
  let results = (outs Tfm_Activation:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Tfm_GatherRowsOp : Tfm_Op<"gather_rows", [Pure]> {
  let summary = "picks rows of a [rows, features] tensor by index";
  let description = [{
    `result[i] = input[rows[i]]`. `insert-kv-cache` uses it to compute logits
    only for the rows a step asks for (by default each sequence's last token).
  }];
  let arguments = (ins Tfm_Activation:$input, Tfm_TokenIds:$rows);
  let results = (outs Tfm_Activation:$result);
  let assemblyFormat = "$input `,` $rows attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Tfm_RepeatOp : Tfm_Op<"repeat", [Pure]> {
  let summary = "repeats each slice along `axis` `repeats` times in a row";
  let description = [{
    Grouped-query attention shares each K/V head among `heads / kv_heads`
    query heads: `[T, kv_heads, d]` repeated on axis 1 becomes
    `[T, heads, d]` with head h reading K/V head `h / repeats`.
  }];
  let arguments = (ins Tfm_Activation:$input, I64Attr:$axis, I64Attr:$repeats);
  let results = (outs Tfm_Activation:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Tfm_AttentionOp : Tfm_Op<"attention", [Pure]> {
  let summary = "softmax(softcap(Q·Kᵀ·scale) (+ causal mask))·V with grouped KV heads";
  let description = [{
    What `fuse-attention` makes of the naive attention subgraph. `query` is
    `[T, heads, head_dim]`, `key` and `value` are `[S, kv_heads, head_dim]`
    with `heads` a multiple of `kv_heads`: query head h reads KV head
    `h / (heads / kv_heads)`. With `causal`, query i sits at position
    `p = S - T + i` and sees keys 0 through p; a `window` (sliding-window
    attention, causal only) narrows that to the keys j with
    `p - window < j <= p`, the last `window` positions. With a `softcap`
    (Gemma 2's attention-logit soft-capping), each scaled score s becomes
    `softcap · tanh(s / softcap)` before the mask and the softmax. The result
    is `[T, heads, head_dim]`.
  }];
  let arguments = (ins Tfm_Activation:$query, Tfm_Activation:$key, Tfm_Activation:$value,
                       F32Attr:$scale, UnitAttr:$causal, OptionalAttr<I64Attr>:$window,
                       OptionalAttr<F32Attr>:$softcap);
  let results = (outs Tfm_Activation:$result);
  let assemblyFormat = [{
    $query `,` $key `,` $value attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

class Tfm_BinaryOp<string mnemonic, string summaryText>
    : Tfm_Op<mnemonic, [Pure, Commutative, SameOperandsAndResultType, Tfm_Elementwise]> {
  let summary = summaryText;
  let arguments = (ins Tfm_Activation:$lhs, Tfm_Activation:$rhs);
  let results = (outs Tfm_Activation:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` type($result)";
}

def Tfm_AddOp : Tfm_BinaryOp<"add", "elementwise sum of two tensors of one shape">;
def Tfm_MulOp : Tfm_BinaryOp<"mul", "elementwise product of two tensors of one shape">;

class Tfm_UnaryOp<string mnemonic, string summaryText, list<Trait> traits = []>
    : Tfm_Op<mnemonic, !listconcat([Pure, SameOperandsAndResultType], traits)> {
  let summary = summaryText;
  let results = (outs Tfm_Activation:$result);
}

def Tfm_ScaleOp : Tfm_UnaryOp<"scale", "multiplies every element by a constant",
    [Tfm_Elementwise, Tfm_CommutesWithRowGather]> {
  let arguments = (ins Tfm_Activation:$input, F32Attr:$factor);
  let assemblyFormat = "$input `,` $factor attr-dict `:` type($result)";
}

def Tfm_SiluOp : Tfm_UnaryOp<"silu", "x · sigmoid(x)",
    [Tfm_Elementwise, Tfm_CommutesWithRowGather]> {
  let arguments = (ins Tfm_Activation:$input);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

def Tfm_GeluOp : Tfm_UnaryOp<"gelu", "Gaussian error linear unit (exact, or the tanh approximation)",
    [Tfm_Elementwise, Tfm_CommutesWithRowGather]> {
  let arguments = (ins Tfm_Activation:$input, UnitAttr:$approximate_tanh);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

def Tfm_TanhOp : Tfm_UnaryOp<"tanh", "hyperbolic tangent",
    [Tfm_Elementwise, Tfm_CommutesWithRowGather]> {
  let description = [{
    Bounds its input to (-1, 1); `cap · tanh(x / cap)` is the soft-capping
    Gemma 2 applies to its final logits.
  }];
  let arguments = (ins Tfm_Activation:$input);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

def Tfm_SoftmaxOp : Tfm_UnaryOp<"softmax", "softmax along one axis"> {
  let arguments = (ins Tfm_Activation:$input, I64Attr:$axis);
  let assemblyFormat = "$input attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Tfm_CausalMaskOp : Tfm_UnaryOp<"causal_mask",
    "sets attention scores of keys after their query to -inf", [Tfm_Elementwise]> {
  let description = [{
    `input` is `[..., queries, keys]`; query i sits at position
    `p = keys - queries + i`, so key j is masked where `j > p`. With a
    `window` (sliding-window attention, as Mistral's and llama.cpp's masks
    define it), key j is also masked where `j <= p - window`: each query sees
    at most the `window` positions ending at its own.
  }];
  let arguments = (ins Tfm_Activation:$input, OptionalAttr<I64Attr>:$window);
  let assemblyFormat = "$input attr-dict `:` type($result)";
  let hasVerifier = 1;
}

#endif  // KVJIT_IR_TFM_TFMOPS_TD
