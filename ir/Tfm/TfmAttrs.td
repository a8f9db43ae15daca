#ifndef KVJIT_IR_TFM_TFMATTRS_TD
#define KVJIT_IR_TFM_TFMATTRS_TD

include "ir/Tfm/TfmDialect.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

def Tfm_StorageType : I32EnumAttr<"StorageType",
    "how a weight's elements are stored (GGUF tensor types)", [
  I32EnumAttrCase<"f32", 0>,
  I32EnumAttrCase<"f16", 1>,
  I32EnumAttrCase<"bf16", 2>,
  I32EnumAttrCase<"q8_0", 3>,
  I32EnumAttrCase<"q4_0", 4>,
  I32EnumAttrCase<"q4_1", 5>,
  I32EnumAttrCase<"q5_0", 6>,
  I32EnumAttrCase<"q5_1", 7>,
  I32EnumAttrCase<"q4_k", 8>,
  I32EnumAttrCase<"q5_k", 9>,
  I32EnumAttrCase<"q6_k", 10>,
]> {
  let cppNamespace = "::kvjit::tfm";
  let genSpecializedAttr = 0;
}

def Tfm_StorageTypeAttr : EnumAttr<Tfm_Dialect, Tfm_StorageType, "storage"> {
  let assemblyFormat = "`<` $value `>`";
}

def Tfm_WeightLayout : I32EnumAttr<"WeightLayout",
    "how a weight's blocks are ordered in the executable (kvx.fbs's WeightLayout)", [
  // GGUF's rows back to back, read in place from the model file.
  I32EnumAttrCase<"gguf", 0>,
  // Groups of 8 rows, each group's blocks column by column (block b of the
  // group's row r at 8 b + r blocks from its start): the 32-element block
  // types, repacked by the compiler into the sidecar.
  I32EnumAttrCase<"rows_interleaved8", 1>,
]> {
  let cppNamespace = "::kvjit::tfm";
  let genSpecializedAttr = 0;
}

def Tfm_WeightLayoutAttr : EnumAttr<Tfm_Dialect, Tfm_WeightLayout, "weight_layout"> {
  let assemblyFormat = "`<` $value `>`";
}

def Tfm_RopeStyle : I32EnumAttr<"RopeStyle",
    "which pairs of a head's elements rotary embedding rotates together", [
  // Pairs (2i, 2i+1): the original RoPE and GGUF's Llama layout.
  I32EnumAttrCase<"interleaved", 0>,
  // Pairs (i, i + d/2): GPT-NeoX and Hugging Face's "rotate half".
  I32EnumAttrCase<"neox", 1>,
]> {
  let cppNamespace = "::kvjit::tfm";
  let genSpecializedAttr = 0;
}

def Tfm_RopeStyleAttr : EnumAttr<Tfm_Dialect, Tfm_RopeStyle, "rope_style"> {
  let assemblyFormat = "`<` $value `>`";
}

def Tfm_RopeScalingKind : I32EnumAttr<"RopeScalingKind",
    "how rotary frequencies are stretched for longer contexts", [
  I32EnumAttrCase<"linear", 0>,
  I32EnumAttrCase<"llama3", 1>,
]> {
  let cppNamespace = "::kvjit::tfm";
  let genSpecializedAttr = 0;
}

def Tfm_RopeScalingAttr : AttrDef<Tfm_Dialect, "RopeScaling"> {
  let mnemonic = "rope_scaling";
  let summary = "rotary frequency scaling (linear position interpolation or Llama 3)";
  let description = [{
    `linear` divides every frequency by `factor`. `llama3` divides the low
    frequencies (wavelength above `original_context / low_freq_factor`) by
    `factor`, keeps the high ones (wavelength below
    `original_context / high_freq_factor`), and blends smoothly between.
  }];
  let parameters = (ins
    EnumParameter<Tfm_RopeScalingKind>:$kind,
    "::llvm::APFloat":$factor,
    // The defaults are ir/Tfm/RopeScaling.h's, the compiler's one set.
    DefaultValuedParameter<"::llvm::APFloat",
        "::llvm::APFloat(::kvjit::RopeScaling().low_freq_factor)">:$low_freq_factor,
    DefaultValuedParameter<"::llvm::APFloat",
        "::llvm::APFloat(::kvjit::RopeScaling().high_freq_factor)">:$high_freq_factor,
    DefaultValuedParameter<"int64_t", "::kvjit::RopeScaling().original_context">:$original_context
  );
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

#endif  // KVJIT_IR_TFM_TFMATTRS_TD
