#ifndef KVJIT_PASSES_PASSES_TD
#define KVJIT_PASSES_PASSES_TD

include "mlir/Pass/PassBase.td"

def KeepFirstLayers : Pass<"keep-first-layers", "::mlir::ModuleOp"> {
  let summary = "Keeps a model's first `layers` decoder layers, then its final norm and output";
  let description = [{
    Cuts each function of the model as imported (before `insert-kv-cache`)
    after its first `layers` decoder layers: what the last layer's output fed
    (the final norm, the output projection and any soft cap after it) reads
    the output of layer `layers - 1` instead, and the later layers' ops and
    the params nothing reads any more are erased. The result is speculative
    decoding's layer-skipping self-draft (docs/speculative-decoding.md): its
    attentions are the model's first `layers`, in order, so that
    `insert-kv-cache` makes them layers 0 to `layers - 1` of a cache whose
    heads, head size, block size and types are the whole model's, and the
    draft reads and writes the first layers of the target's KV pool.

    Layers are found by their weights: layer i is what reads a param named
    `blk.<i>.…` (GGUF's names, which the frontend gives every model's
    layers), and an op belongs to the last layer whose weights it depends
    on. The output of layer i is the one value that depends on layer i's
    weights while its users no longer lead to them, though its operands
    did: the residual sum that the next layer (or the final norm) reads.

    `layers` equal to the function's layer count leaves it unchanged. An
    error names both numbers where `layers` is 0 or more than the function
    has, and the function where it finds no layers, a layer without one
    such output, or a KV cache already (after `insert-kv-cache`, whose
    cache holds every layer).
  }];
  let options = [
    Option<"layers", "layers", "int64_t", /*default=*/"0",
           "the decoder layers to keep, counted from the first (at least 1)">,
  ];
  let dependentDialects = ["::kvjit::tfm::TfmDialect"];
}

def FuseAttention : Pass<"fuse-attention", "::mlir::ModuleOp"> {
  let summary = "Fuses the naive attention subgraph into tfm.attention";
  let description = [{
    Matches what the frontend writes for attention — transposes `[1, 0, 2]`
    of Q and V and `[1, 2, 0]` of K to head-major order, `Q·Kᵀ`, an optional
    `tfm.scale` (scale 1 without one), an optional soft cap after it
    (`tfm.scale` by 1 / cap, `tfm.tanh`, `tfm.scale` by cap: Gemma 2's,
    which becomes the attention's `softcap`), an optional `tfm.causal_mask`
    after those (its sliding `window`, where it has one, becomes the
    attention's), `tfm.softmax` over the keys (the last axis), `·V` and the transpose
    `[1, 0, 2]` back — and replaces it with one `tfm.attention` on the
    token-major `[T, heads, head_dim]` operands. Where K and V are both
    repeated alike on the head axis (grouped-query attention: `tfm.repeat`
    on axis 1, same repeats, same input type), the attention reads the
    unrepeated `[S, kv_heads, head_dim]` tensors, so that later passes cache
    each shared head once; any other repetition stays part of the operand.

    Every intermediate of the chain must have no other user. Anything else —
    softmax over another axis, other permutations, a mask other than
    `tfm.causal_mask` or one applied before the scale, operand types that
    `tfm.attention` would not verify — is left as it is, without a
    diagnostic: not fusing never changes what the function computes.
  }];
  let dependentDialects = ["::kvjit::tfm::TfmDialect"];
}

def ShardTensorParallel : Pass<"shard-tensor-parallel", "::mlir::ModuleOp"> {
  let summary = "Makes one rank's program of a model split over `ranks` processes";
  let description = [{
    Tensor parallelism as Megatron-LM splits a decoder: rank `rank` of
    `ranks` computes its share of each layer's attention heads and of its
    feed-forward columns, and the ranks meet twice per layer to add up their
    partial results. Run once per rank on the model as imported and after
    `fuse-attention` (each attention is one `tfm.attention`), before
    `fuse-projections` and `insert-kv-cache`; the driver (`kvjit compile --tp
    N`) compiles the N programs from one import.

    - **Attention.** The heads are shared out by whole KV-head groups: with
      at least as many KV heads as ranks, rank r gets KV heads
      [⌊r·KV/N⌋, ⌊(r+1)·KV/N⌋) and their query heads; with fewer, the N
      ranks must be a multiple of the KV heads, each KV head is replicated
      on N/KV ranks (as vLLM does) and its query heads are shared out among
      them. Q, K and V (and their biases) become column-parallel: the rows
      of their weights for the rank's heads. The ops between a projection
      and the attention (reshape, rope, per-head norms) work on the rank's
      heads, and so does the attention, so `insert-kv-cache` makes a cache
      of the rank's KV heads alone. The output projection becomes
      row-parallel: the columns of its weight for the rank's heads,
      followed by `dist.all_reduce`; its bias stays on rank 0 alone.
    - **Feed-forward.** A linear whose input is a tree of `Elementwise` ops
      over linears that read one input (gate and up) is a feed-forward
      block: the intermediate columns are shared out (their boundaries on
      whole blocks of the down projection's storage type), gate and up
      become column-parallel and the down projection row-parallel, followed
      by `dist.all_reduce`.
    - **Output.** The linear from which the function's result comes through
      `Elementwise` ops (a soft cap) is split by vocabulary rows and
      followed by `dist.all_gather`: each rank reads 1/N of the output
      matrix, the largest of a small model.
    - **Replicated**: the embedding (mapped in place, a rank touches only
      the rows of the tokens it looks up), the norms and the residual
      stream.

    Each shard is a new `tfm.param ... sliced` of the model's weight, named
    by the weight and the rank (`@blk.0.attn_q.weight.rank1`): a slice of
    rows is read in place from the model file, a slice of columns goes into
    the rank's sidecar. The module gets `dist.ranks` and `dist.rank`.

    `ranks` 1 leaves the module unchanged. Errors name the op or weight:
    heads that cannot be shared out (fewer heads than ranks; KV heads that
    do not divide the ranks), a shard of columns that would not begin on a
    block boundary, an attention whose operands do not come from
    projections through per-head ops, a module with a KV cache or fused
    projections already, or one sharded already.
  }];
  let options = [
    Option<"ranks", "ranks", "int64_t", /*default=*/"1",
           "the processes the model is split over">,
    Option<"rank", "rank", "int64_t", /*default=*/"0",
           "which of them this program is, from 0">,
  ];
  let dependentDialects = ["::kvjit::tfm::TfmDialect", "::kvjit::dist::DistDialect"];
}

def FuseProjections : Pass<"fuse-projections", "::mlir::ModuleOp"> {
  let summary = "Fuses linears that read one input (Q, K, V; gate, up) into one linear";
  let description = [{
    Horizontal fusion: within a block, the `tfm.linear`s that read the same
    input value, with no bias, each over a `tfm.weight` that nothing else
    reads, of a param that is itself no concatenation, become one linear
    over a new param that concatenates their weights' rows
    (`tfm.param ... concat [...]`), in program order. Each old result
    becomes a `tfm.slice_columns` of the fused result: its columns, where
    its own rows of the weight put them. Only weights of one storage type
    are concatenated (a GGUF row is a whole number of blocks, so rows of one
    type concatenate byte for byte); where the linears of one input have
    several storage types, each type with two or more linears is fused
    apart. The fused param is named by the parts' common prefix and the
    rest of each name joined with `+`, placed after its last part.

    One matrix product over the concatenated rows computes every output
    element exactly as its own linear did (the same row times the same
    input), so the numbers do not change. The input is read once, the step
    has one kernel launch where it had two or three, and the matrix-vector
    kernels of decode see one long row range to split over threads.

    Left alone, without a diagnostic: linears of different inputs, a lone
    linear of its storage type, a linear with a bias, and one whose weight
    value has other readers or does not come straight from a `tfm.weight`
    (a transposed or computed weight).
  }];
  let dependentDialects = ["::kvjit::tfm::TfmDialect"];
}

def ChooseWeightLayouts : Pass<"choose-weight-layouts", "::mlir::ModuleOp"> {
  let summary = "Chooses, per weight and target CPU ISA, the layout its kernels read";
  let description = [{
    Sets `layout <rows_interleaved8>` on each `tfm.param` that the CPU
    kernels of `isa` (avx512vnni, avx2 or portable) read faster in groups of
    8 rows stored block column by block column (kvx.fbs's
    `RowsInterleaved8`, defined with its repacking in
    `runtime/schema/WeightLayout.h`); the executable writer repacks those
    weights into the `.kvw` sidecar, and every other weight keeps its
    offset in the model file. A weight qualifies when it is a matrix of a
    32-element block type (q8_0, q4_0, q4_1, q5_0, q5_1) with a multiple of
    8 rows, has no layout yet, and every reader is a `tfm.weight` whose
    every user reads it as a `tfm.linear`'s weight operand or a
    `tfm.embedding`'s table (the lookup reads either layout, so a tied
    `token_embd`, both table and output projection, qualifies): a
    concatenation, a shift or any other op keeps it in GGUF's rows.

    `policy=measured` (the default) chooses the layout only for the storage
    types (and, where the measurements say so, the row lengths) where it
    measured faster than GGUF's rows on `isa` and the
    microarchitecture `cpu` (generic, zen4 or zen5; the table in
    ChooseWeightLayouts.cpp, from docs/benchmarks.md, *Weight layouts*);
    `policy=every` chooses it for every weight that qualifies (to measure
    it, and in tests). The kernels' results are the same bits in either
    layout (docs/numerics.md), so the pass never changes the numbers. An
    `isa`, `cpu` or `policy` it does not know is an error. The CUDA target does
    not run this pass.
  }];
  let options = [
    Option<"isa", "isa", "std::string", /*default=*/"\"\"",
           "the CPU instruction set the executable is for: avx512vnni, avx2 or portable">,
    Option<"cpu", "cpu", "std::string", /*default=*/"\"generic\"",
           "the microarchitecture the measurements are for: generic, zen4 or zen5">,
    Option<"policy", "policy", "std::string", /*default=*/"\"measured\"",
           "measured: where the layout measured faster on isa; every: every weight that qualifies">,
  ];
  let dependentDialects = ["::kvjit::tfm::TfmDialect"];
}

def InsertKvCache : Pass<"insert-kv-cache", "::mlir::ModuleOp"> {
  let summary = "Turns the whole-sequence function into a step function over a paged KV cache";
  let description = [{
    Rewrites `@forward(tokens, positions) -> logits[T, vocab]`, whose
    attention is fused (`tfm.attention`, causal), into `@step` with the
    arguments of the step contract (tokens, positions, seq_starts,
    context_lens, slot_mapping, block_tables, logits_rows, cache). Each
    attention, in program order, becomes layer i of the cache: `kv.write` of
    its K and V, then `kv.attention` of its queries over the cache, with the
    attention's sliding `window` and `softcap` where it has them (layers may
    differ). Gathering rows commutes with the ops of class `CommutesWithRowGather` (linear,
    norms, unary elementwise ops; `ir/Tfm/TfmTraits.td`), so the logits are
    computed only for `logits_rows`: a `tfm.gather_rows` moves up past the
    final such ops. One function thus serves prefill, chunked prefill and
    decode for any mix of sequences. A function with attention that is not
    causal, or with no attention, gets a diagnostic. The cache stores keys
    and values as `cache-dtype` says, or each apart as `cache-dtype-k` and
    `cache-dtype-v` (llama.cpp's `-ctk`/`-ctv`); the types stored in blocks
    of 32 (q8_0, q4_0, f8_e4m3) need head_dim a multiple of 32. With
    `rotation=auto` such keys (values) are stored rotated by a
    Walsh-Hadamard matrix where head_dim is a multiple of 64 (the keys by
    the largest power of two dividing it, the values by 64), as llama.cpp
    rotates its quantized caches; `rotation=none` stores them as they are.
  }];
  let dependentDialects = ["::kvjit::tfm::TfmDialect", "::kvjit::kv::KvDialect"];
  let options = [
    Option<"blockSize", "block-size", "int64_t", /*default=*/"16",
           "tokens per KV-cache block">,
    Option<"cacheElementType", "cache-dtype", "std::string", /*default=*/"\"f32\"",
           "how the cache stores keys and values: f32, f16, bf16, q8_0, q4_0 or f8_e4m3">,
    Option<"keyElementType", "cache-dtype-k", "std::string", /*default=*/"\"\"",
           "how the cache stores keys, where not as cache-dtype says">,
    Option<"valueElementType", "cache-dtype-v", "std::string", /*default=*/"\"\"",
           "how the cache stores values, where not as cache-dtype says">,
    Option<"rotation", "rotation", "std::string", /*default=*/"\"auto\"",
           "auto: rotate quantized keys and values by a Walsh-Hadamard matrix where head_dim is a "
           "multiple of 64, as llama.cpp does; none: store them as they are">,
  ];
}

def FuseElementwise : Pass<"fuse-elementwise", "::mlir::ModuleOp"> {
  let summary = "Groups elementwise chains into fusion regions, one kernel each";
  let description = [{
    Moves the elementwise and row-wise tfm ops between the GEMMs into
    `kernel.fusion` regions, one per kernel that codegen will emit. Within
    each block (outside existing fusions), in this order of precedence:

    1. `row_wise`: each op of class `RowWise` (`ir/Tfm/TfmTraits.td`:
       `tfm.rms_norm`, `tfm.layer_norm`, `tfm.rope`) in a fusion of its own.
       Where the op is also `FusesResidualAdd` (`tfm.rms_norm`) and its
       first operand is a `tfm.add` of the same block, the add joins it when
       every other reader of the sum comes after the op; the fusion then
       yields both the sum (the residual stream the next residual add reads)
       and the op's result. Where one add feeds several such ops, the first
       one takes it. q and k get one rope fusion each: their head counts
       differ under GQA.
    2. `swiglu`: a `tfm.mul` with a `tfm.silu` operand (the left one if
       both are) whose result has no other use (`silu(gate) · up`),
       yielding the product.
    3. `elementwise`: the remaining ops of class `Elementwise`
       (`tfm.add`, `mul`, `scale`, `silu`, `gelu`, `tanh`, `causal_mask`) in
       maximal trees: a producer joins its consumer's fusion when its result
       has exactly one use. The fusion yields the tree's root.

    Each fusion takes the place of its group's last op, so that everything
    the group reads (such as a norm's weight, read after the add) is
    defined before it; an add whose sum is read before its norm therefore
    falls through to rule 3, and the norm runs alone. Linears, matmuls,
    attention, embedding, reshapes, transposes and softmax stay outside:
    they are library calls or kernels of their own. After the pass, every
    op of the three rules sits in a fusion. The fusion's operands are the
    values its ops read from outside, in order of first use; its body holds
    clones of the ops, so the numbers do not change.
  }];
  let dependentDialects = ["::kvjit::kernel::KernelDialect"];
}

def PlanMemory : Pass<"plan-memory", "::mlir::ModuleOp"> {
  let summary = "Places every intermediate in one activation arena and fixes the paged KV layout";
  let description = [{
    Decides, for each function with a body, where its activations live and
    how its paged KV pool is laid out. The decisions are attributes that
    codegen and the executable writer copy out; `VerifyMemoryPlan`
    (passes/MemoryPlanChecker.h) re-derives liveness and proves a plan sound.

    **Activation arena.** Every tensor result of an op directly in the
    function body gets a byte offset in one arena. Block arguments are the
    step's inputs and `tfm.weight` and constant results are model data, so
    none of them take arena space; nor does a `tfm.slice_columns`, a view
    that codegen reads in place, whose uses keep the value it views alive
    instead. A value's size is its element count times
    its element bytes, with every dynamic dimension bounded by
    `max-tokens-per-step` (T): `[T, hidden]` activations, `[L, vocab]`
    logits with L <= T, and the `[heads, T, T]` scores of unfused attention
    all fit any step the runtime schedules under that token budget. Each
    size is rounded up to `alignment`, so that every offset is aligned.

    A value is live from the op that defines it through its last use, ops
    counted in program order; a use inside an op's region (a fusion region)
    counts at that op. Live ranges are closed: an op's result never shares
    bytes with its operands, so kernels need not support running in place.
    Values are placed largest first (ties in program order); each takes the
    smallest gap between already placed values whose live ranges overlap
    its own that holds it, or else the offset just past the highest of
    them. Placing big buffers first keeps the small ones from fragmenting
    the arena — TFLite's greedy-by-size plan, close to optimal
    on transformer graphs where a few shapes repeat layer after layer.

    Attributes written (typed in ODS: `#kernel.arena`, `#kv.layout`):
      - on each op with results in the body: `kernel.arena_offsets`, an
        `array<i64>` with one byte offset per result, -1 where a result is
        not in the arena;
      - on the function: `kernel.arena = #kernel.arena<bytes = …,
        naive_bytes = …, max_tokens = …, alignment = …>`: the arena's size,
        what giving each value its own aligned buffer would take, and the
        bounds the plan holds for.

    **Paged KV layout.** A function with a `!kv.cache` argument gets
    `kv.layout = #kv.layout<…>` with `block_bytes` = 2 × layers × kv_heads ×
    head_dim × block_size × bytes(element_type), `blocks` =
    floor(`kv-memory-mib` / block bytes), the blocks a pool of that budget
    holds, and the layout's strides; a budget below one block is an error
    that names the function. A block holds `block_size` token slots
    of every layer, in row-major order [layer][K, V][slot][kv_head][head_dim]:
    a kernel attending layer l reads each block's K (then V) as one
    contiguous `block_size × kv_heads × head_dim` tile, and `kv.write`
    stores a token's K or V as one contiguous row.

    The block size comes from the cache type (`insert-kv-cache`'s
    `block-size`, 16 by default). 16 is the balance vLLM settled on: a
    sequence wastes at most 15 slots (under 1% of a 2K context) and
    copy-on-write of a shared partial block copies at most 15 tokens, while
    block tables stay short and each block still gives the attention kernel
    a whole 16-row tile of keys, the M/N of one tensor-core MMA. Smaller
    blocks multiply table lookups and scattered loads; larger ones waste
    memory per sequence and per beam.

    With `report`, a remark on each function states the arena against the
    naive sum (the reuse ratio), how many values were placed, and the KV
    bytes per block and blocks for the budget.
  }];
  let options = [
    Option<"maxTokensPerStep", "max-tokens-per-step", "int64_t", /*default=*/"512",
           "tokens one step may carry; bounds every dynamic dimension">,
    Option<"kvMemoryMib", "kv-memory-mib", "int64_t", /*default=*/"1024",
           "memory for the paged KV pool, in MiB">,
    Option<"alignment", "alignment", "int64_t", /*default=*/"256",
           "byte alignment of every arena offset (a power of two)">,
    Option<"report", "report", "bool", /*default=*/"false",
           "emit a remark per function summarizing the plan">,
  ];
  let dependentDialects = ["::kvjit::kernel::KernelDialect", "::kvjit::kv::KvDialect"];
}

#endif  // KVJIT_PASSES_PASSES_TD
