#ifndef KVJIT_IR_KV_KVDIALECT_TD
#define KVJIT_IR_KV_KVDIALECT_TD

include "mlir/IR/OpBase.td"

def Kv_Dialect : Dialect {
  let name = "kv";
  let cppNamespace = "::kvjit::kv";
  let summary = "The paged KV cache: its type, writes into it and attention over it";
  let description = [{
    `insert-kv-cache` turns a whole-sequence tfm function into a step
    function over a packed batch of sequences. The cache is one pool of
    fixed-size blocks (`!kv.cache`); each sequence owns a list of blocks (its
    block table). A step writes the K and V of its new tokens into the slots
    the runtime assigned them (`kv.write`) and attends over each sequence's
    cached tokens through its block table (`kv.attention`).

    The step function's arguments, in the order of `kStepInputs` in
    `runtime/schema/StepContract.h` (see docs/design.md):
    `tokens i32[T]`, `positions i32[T]`, `seq_starts i32[S+1]`,
    `context_lens i32[S]`, `slot_mapping i32[T]`,
    `block_tables i32[S, max_blocks]`, `logits_rows i32[L]`, and the cache.
    Slot `s` is offset `s % block_size` of block `s / block_size`.
  }];
  let useDefaultTypePrinterParser = 1;
  let useDefaultAttributePrinterParser = 1;
  // plan-memory's KV layout of a step function (KvAttrs.td).
  let discardableAttrs = (ins "::kvjit::kv::LayoutAttr":$layout);
}

class Kv_Op<string mnemonic, list<Trait> traits = []>
    : Op<Kv_Dialect, mnemonic, traits>;

#endif  // KVJIT_IR_KV_KVDIALECT_TD
