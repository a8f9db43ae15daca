#ifndef KVJIT_IR_KV_KVTYPES_TD
#define KVJIT_IR_KV_KVTYPES_TD

include "ir/Kv/KvDialect.td"
include "mlir/IR/AttrTypeBase.td"

def Kv_CacheType : TypeDef<Kv_Dialect, "Cache"> {
  let mnemonic = "cache";
  let summary = "a paged K/V pool for every layer of a model";
  let description = [{
    Blocks of `block_size` token slots; each slot holds, for every layer,
    the K and the V of `kv_heads` heads of `head_dim` elements of
    `element_type`. Its byte layout is plan-memory's decision.
  }];
  let parameters = (ins "int64_t":$layers, "int64_t":$kv_heads, "int64_t":$head_dim,
                        "int64_t":$block_size, "::mlir::Type":$element_type);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

#endif  // KVJIT_IR_KV_KVTYPES_TD
