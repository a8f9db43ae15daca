#ifndef KVJIT_IR_KV_KVATTRS_TD
#define KVJIT_IR_KV_KVATTRS_TD

include "ir/Kv/KvDialect.td"
include "mlir/IR/AttrTypeBase.td"

def Kv_LayoutAttr : AttrDef<Kv_Dialect, "Layout"> {
  let mnemonic = "layout";
  let summary = "the byte layout of a step function's paged KV pool";
  let description = [{
    What `plan-memory` decides for a function with a `!kv.cache` argument,
    left on it as `kv.layout`. The pool is `blocks` blocks of
    `block_bytes` each; a block holds `block_size` token slots of every
    layer, row-major [layer][K, V][slot][kv_head][head_dim] of
    `element_type`: layer l's K of slot s starts at
    `l × layer_stride_bytes + s × slot_stride_bytes` in its block, its V
    `value_offset_bytes` further.

    ```mlir
    func.func @step(...) attributes {kv.layout = #kv.layout<block_size = 16,
        element_type = f16, block_bytes = 4096, blocks = 256,
        layer_stride_bytes = 2048, value_offset_bytes = 1024,
        slot_stride_bytes = 64>}
    ```
  }];
  let parameters = (ins "int64_t":$block_size, "::mlir::Type":$element_type,
                        "int64_t":$block_bytes, "int64_t":$blocks,
                        "int64_t":$layer_stride_bytes, "int64_t":$value_offset_bytes,
                        "int64_t":$slot_stride_bytes);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

#endif  // KVJIT_IR_KV_KVATTRS_TD
