#ifndef KVJIT_IR_KV_KVATTRS_TD
#define KVJIT_IR_KV_KVATTRS_TD

include "ir/Kv/KvDialect.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

def Kv_CacheElement : I32EnumAttr<"CacheElement",
    "how the KV cache stores keys or values (runtime/schema/KvCacheFormat.h)", [
  I32EnumAttrCase<"f32", 0>,
  I32EnumAttrCase<"f16", 1>,
  I32EnumAttrCase<"bf16", 2>,
  // Blocks of 32 elements of one head, each with its own scale.
  I32EnumAttrCase<"q8_0", 3>,
  I32EnumAttrCase<"q4_0", 4>,
  I32EnumAttrCase<"f8_e4m3", 5>,
]> {
  let cppNamespace = "::kvjit::kv";
  let genSpecializedAttr = 0;
}

def Kv_LayoutAttr : AttrDef<Kv_Dialect, "Layout"> {
  let mnemonic = "layout";
  let summary = "the byte layout of a step function's paged KV pool";
  let description = [{
    What `plan-memory` decides for a function with a `!kv.cache` argument,
    left on it as `kv.layout`. The pool is `blocks` blocks of
    `block_bytes` each; a block holds `block_size` token slots of every
    layer, the keys of every slot, then their values: layer l's K of slot
    s starts at `l × layer_stride_bytes + s × key_slot_stride_bytes` in its
    block, its V at `l × layer_stride_bytes + value_offset_bytes +
    s × value_slot_stride_bytes`. A slot's keys are [kv_head][head_dim]
    elements of `key_type`, its values of `value_type`.

    ```mlir
    func.func @step(...) attributes {kv.layout = #kv.layout<block_size = 16,
        key_type = q8_0, value_type = f16, block_bytes = 3136, blocks = 256,
        layer_stride_bytes = 1568, value_offset_bytes = 544,
        key_slot_stride_bytes = 34, value_slot_stride_bytes = 64>}
    ```
  }];
  let parameters = (ins "int64_t":$block_size, EnumParameter<Kv_CacheElement>:$key_type,
                        EnumParameter<Kv_CacheElement>:$value_type,
                        "int64_t":$block_bytes, "int64_t":$blocks,
                        "int64_t":$layer_stride_bytes, "int64_t":$value_offset_bytes,
                        "int64_t":$key_slot_stride_bytes, "int64_t":$value_slot_stride_bytes);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

#endif  // KVJIT_IR_KV_KVATTRS_TD
