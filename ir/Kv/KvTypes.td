#ifndef KVJIT_IR_KV_KVTYPES_TD
#define KVJIT_IR_KV_KVTYPES_TD

include "ir/Kv/KvDialect.td"
include "ir/Kv/KvAttrs.td"
include "mlir/IR/AttrTypeBase.td"

def Kv_CacheType : TypeDef<Kv_Dialect, "Cache"> {
  let mnemonic = "cache";
  let summary = "a paged K/V pool for every layer of a model";
  let description = [{
    Blocks of `block_size` token slots; each slot holds, for every layer,
    the K and the V of `kv_heads` heads of `head_dim` elements, the keys
    stored as `key_type` and the values as `value_type` (a type in blocks
    of 32, q8_0, q4_0 or f8_e4m3, needs head_dim a multiple of 32). A
    nonzero `key_rotation` (`value_rotation`) stores the keys (values)
    rotated by the Walsh-Hadamard matrix of that many elements, block by
    block of each head, and attention rotates the queries (its output) to
    match (runtime/schema/KvCacheFormat.h). Its byte layout is
    plan-memory's decision.

    ```mlir
    !kv.cache<layers = 30, kv_heads = 3, head_dim = 64, block_size = 16,
              key_type = q8_0, value_type = q8_0, key_rotation = 64, value_rotation = 64>
    ```
  }];
  let parameters = (ins "int64_t":$layers, "int64_t":$kv_heads, "int64_t":$head_dim,
                        "int64_t":$block_size, EnumParameter<Kv_CacheElement>:$key_type,
                        EnumParameter<Kv_CacheElement>:$value_type,
                        DefaultValuedParameter<"int64_t", "0">:$key_rotation,
                        DefaultValuedParameter<"int64_t", "0">:$value_rotation);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

#endif  // KVJIT_IR_KV_KVTYPES_TD
