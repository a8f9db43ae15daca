#ifndef KVJIT_IR_KV_KVOPS_TD
#define KVJIT_IR_KV_KVOPS_TD

include "ir/Kv/KvDialect.td"
include "ir/Kv/KvAttrs.td"
include "ir/Kv/KvTypes.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def Kv_I32Vector : 1DTensorOf<[I32]>;
def Kv_Activation : RankedTensorOf<[F32]>;

def Kv_WriteOp : Kv_Op<"write", [MemoryEffects<[MemWrite]>]> {
  let summary = "stores the K and V of a step's new tokens into their cache slots";
  let description = [{
    `key` and `value` are `[T, kv_heads, head_dim]`; token t goes to slot
    `slot_mapping[t]` of layer `layer`.
  }];
  let arguments = (ins Kv_CacheType:$cache, Kv_Activation:$key, Kv_Activation:$value,
                       Kv_I32Vector:$slot_mapping, I64Attr:$layer);
  let assemblyFormat = [{
    $key `,` $value `into` $cache `[` $layer `]` `at` $slot_mapping attr-dict `:`
    type($key) `,` type($value) `,` type($slot_mapping) `,` qualified(type($cache))
  }];
  let hasVerifier = 1;
}

def Kv_AttentionOp : Kv_Op<"attention", [MemoryEffects<[MemRead]>]> {
  let summary = "causal attention of a step's queries over their sequences' cached K and V";
  let description = [{
    `query` is `[T, heads, head_dim]`, the new tokens of S sequences packed
    one after another (`seq_starts`, S+1 entries). Token t of sequence s, at
    `positions[t]`, attends to the first `positions[t] + 1` cached tokens of
    s, read through row s of `block_tables`; the cache already holds this
    step's K and V (kv.write comes first) and `context_lens[s]` tokens in all.
    Query head h reads KV head `h / (heads / kv_heads)`. The result is
    `[T, heads, head_dim]`.

    With a `window` (sliding-window attention), the token at position p
    attends only to the cached positions j with `p - window < j <= p`. The
    runtime may then have given back the blocks of s that hold only
    positions before that range: their entries in `block_tables` are never
    read, whatever they hold.

    With a `softcap`, each score s = scale · (q · k) becomes
    `softcap · tanh(s / softcap)` before the softmax (Gemma 2).
  }];
  let arguments = (ins Kv_Activation:$query, Kv_CacheType:$cache, I64Attr:$layer,
                       Kv_I32Vector:$positions, Kv_I32Vector:$seq_starts,
                       Kv_I32Vector:$context_lens, 2DTensorOf<[I32]>:$block_tables,
                       F32Attr:$scale, OptionalAttr<I64Attr>:$window,
                       OptionalAttr<F32Attr>:$softcap);
  let results = (outs Kv_Activation:$result);
  let assemblyFormat = [{
    $query `,` $cache `[` $layer `]` `positions` $positions `seq_starts` $seq_starts
    `context_lens` $context_lens `block_tables` $block_tables attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

#endif  // KVJIT_IR_KV_KVOPS_TD
