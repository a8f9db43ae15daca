#ifndef KVJIT_IR_TFM_TFMDIALECT_TD
#define KVJIT_IR_TFM_TFMDIALECT_TD

include "mlir/IR/OpBase.td"

def Tfm_Dialect : Dialect {
  let name = "tfm";
  let cppNamespace = "::kvjit::tfm";
  let summary = "A Transformer model's math, with value semantics and no KV cache";
  let description = [{
    The `tfm` dialect is the first IR level of kvjit: what a model file
    defines, written out op by op on `tensor<...>` values with a dynamic token
    dimension. Weights are module-level symbols (`tfm.param`) whose storage
    type (f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q5_k, q6_k) is
    an attribute; functions read them with `tfm.weight`. Attention is written
    the naive way, `softmax(Q·Kᵀ·scale + mask)·V`, exactly as the model
    defines it; fusing it and inserting the KV cache are passes.

    Layout conventions: activations are `[tokens, features]` or
    `[tokens, heads, head_dim]`; a linear layer's weight is `[out, in]`, as in
    PyTorch and as GGUF stores it (GGUF lists the dimensions fastest first,
    so GGUF `{in, out}` is `[out, in]` here).
  }];
  let useDefaultAttributePrinterParser = 1;
  let dependentDialects = ["::mlir::func::FuncDialect"];
}

class Tfm_Op<string mnemonic, list<Trait> traits = []>
    : Op<Tfm_Dialect, mnemonic, traits>;

#endif  // KVJIT_IR_TFM_TFMDIALECT_TD
