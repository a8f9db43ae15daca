#ifndef KVJIT_IR_KERNEL_KERNELATTRS_TD
#define KVJIT_IR_KERNEL_KERNELATTRS_TD

include "ir/Kernel/KernelDialect.td"
include "mlir/IR/AttrTypeBase.td"

def Kernel_ArenaAttr : AttrDef<Kernel_Dialect, "Arena"> {
  let mnemonic = "arena";
  let summary = "a function's activation arena";
  let description = [{
    What `plan-memory` decides for a function's activations, left on it as
    `kernel.arena`: the arena is `bytes` long and holds every activation of
    a step of up to `max_tokens` tokens at the offsets in each op's
    `kernel.arena_offsets`, all multiples of `alignment`. `naive_bytes` is
    what one buffer per activation would take (the reuse it is compared
    with).

    ```mlir
    func.func @step(...) attributes {kernel.arena = #kernel.arena<bytes = 2048,
        naive_bytes = 4096, max_tokens = 8, alignment = 256>}
    ```
  }];
  let parameters = (ins "int64_t":$bytes, "int64_t":$naive_bytes, "int64_t":$max_tokens,
                        "int64_t":$alignment);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

#endif  // KVJIT_IR_KERNEL_KERNELATTRS_TD
