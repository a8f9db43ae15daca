#!/usr/bin/env python3
"""Writes the random-weight model of make_random_hf_model.py (same family,
seed and weights) as a GGUF file, with llama.cpp's own writer (the `gguf`
package, pinned in scripts/setup.sh), laid out as llama.cpp's
convert_hf_to_gguf.py lays out that architecture:

  make_random_gguf_model.py --family llama3 --dtype f32 --tokenizer T.json OUT.gguf

- llama / llama3: general.architecture "llama"; q and k rows permuted from
  Hugging Face's rotate-half order into interleaved pairs; llama3's rope
  scaling stored only as the `rope_freqs.weight` tensor (one f32 divisor per
  rotated pair, no rope.scaling.* keys); output.weight absent when tied.
- mistral: as llama, with llama.attention.sliding_window (the window).
- qwen2 / qwen3: general.architecture "qwen2" / "qwen3", q and k rows kept in
  Hugging Face's order; qwen3's q_norm / k_norm as blk.N.attn_q_norm.weight /
  attn_k_norm.weight and its head_dim as qwen3.attention.key_length.
- phi3: general.architecture "phi3", qkv_proj as blk.N.attn_qkv.weight and
  gate_up_proj as blk.N.ffn_up.weight (as Hugging Face stores them, no
  permutation: llama.cpp's phi3 rope is NeoX), LongRoPE as the tensors
  rope_factors_long.weight / rope_factors_short.weight with
  phi3.rope.scaling.original_context_length and phi3.rope.scaling.attn_factor,
  and phi3.attention.sliding_window 0 (none).
- gemma3: general.architecture "gemma3", 1 added to every norm weight (as
  convert_hf_to_gguf.py does for Gemma), post_attention_layernorm as
  post_attention_norm, pre_feedforward_layernorm as ffn_norm,
  post_feedforward_layernorm as post_ffw_norm, gemma3.attention.sliding_window
  (8, so that the test prompts outgrow it).
- gemma2: general.architecture "gemma2", Gemma's norms and names as gemma3,
  no q/k norms, gemma2.attention.sliding_window (8),
  gemma2.attn_logit_softcapping and gemma2.final_logit_softcapping.
- --dtype f16: matrices in F16, vectors (norms, biases, rope_freqs) in F32.
- the vocabulary of the tokenizer.json as a "gpt2" (byte-level BPE) GGUF
  vocabulary: tokens by id, special added tokens CONTROL, merges "a b".

write_gguf holds this layout; write_transformers_weights.py writes its GGUFs
with it too, in q8_0 as well and with the converter's own metadata
(as_converter).
"""
import argparse
import math
import os
import sys

import gguf
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kquant_blocks  # noqa: E402
import make_random_hf_model as hf  # noqa: E402

ARCHITECTURE = {"llama": "llama", "llama3": "llama", "qwen2": "qwen2", "qwen3": "qwen3",
                "phi3": "phi3", "mistral": "llama", "gemma2": "gemma2", "gemma3": "gemma3"}

PER_LAYER = {
    "input_layernorm.weight": "attn_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight",
    "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.v_proj.weight": "attn_v.weight",
    "self_attn.q_proj.bias": "attn_q.bias",
    "self_attn.k_proj.bias": "attn_k.bias",
    "self_attn.v_proj.bias": "attn_v.bias",
    "self_attn.o_proj.weight": "attn_output.weight",
    "self_attn.q_norm.weight": "attn_q_norm.weight",
    "self_attn.k_norm.weight": "attn_k_norm.weight",
    "post_attention_layernorm.weight": "ffn_norm.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight",
    "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
    "self_attn.qkv_proj.weight": "attn_qkv.weight",
    "mlp.gate_up_proj.weight": "ffn_up.weight",
}

GLOBAL = {
    "model.embed_tokens.weight": "token_embd.weight",
    "model.norm.weight": "output_norm.weight",
    "lm_head.weight": "output.weight",
}

# The special tokens of each tokenizer family, as the released GGUFs set them.
SPECIAL_IDS = {
    "llama": {"bos": 0, "eos": 1, "add_bos": True, "pre": "llama-bpe"},
    "llama3": {"bos": 0, "eos": 1, "add_bos": True, "pre": "llama-bpe"},
    "mistral": {"bos": 0, "eos": 1, "add_bos": True, "pre": "llama-bpe"},
    "qwen2": {"bos": 0, "eos": 2, "add_bos": False, "pre": "qwen2"},
    "qwen3": {"bos": 0, "eos": 2, "add_bos": False, "pre": "qwen2"},
    "phi3": {"bos": 0, "eos": 1, "add_bos": True, "pre": "llama-bpe"},
    "gemma2": {"bos": 0, "eos": 1, "add_bos": True, "pre": "llama-bpe"},
    "gemma3": {"bos": 0, "eos": 1, "add_bos": True, "pre": "llama-bpe"},
}

# Gemma's names for its four norms of a layer.
GEMMA_PER_LAYER = dict(PER_LAYER, **{
    "post_attention_layernorm.weight": "post_attention_norm.weight",
    "pre_feedforward_layernorm.weight": "ffn_norm.weight",
    "post_feedforward_layernorm.weight": "post_ffw_norm.weight",
})


def gguf_name(hf_name, family):
    if hf_name in GLOBAL:
        return GLOBAL[hf_name]
    parts = hf_name.split(".", 3)  # model.layers.N.rest
    per_layer = GEMMA_PER_LAYER if family in hf.GEMMA else PER_LAYER
    return "blk.%s.%s" % (parts[2], per_layer[parts[3]])


def permute_to_interleaved(weights, heads):
    """convert_hf_to_gguf.py's LlamaModel.permute: rotate-half rows of each head
    into interleaved pairs."""
    return (weights.reshape(heads, 2, weights.shape[0] // heads // 2, *weights.shape[1:])
            .swapaxes(1, 2).reshape(weights.shape))


def llama3_rope_factors(config):
    """convert_hf_to_gguf.py's LlamaModel.generate_extra_tensors for rope_type
    llama3: 1 for high frequencies, `factor` for low ones, a blend between."""
    scaling = config["rope_scaling"]
    dim = config.get("head_dim", config["hidden_size"] // config["num_attention_heads"])
    base = config["rope_theta"]
    freqs = 1.0 / (base ** (np.arange(0, dim, 2, dtype=np.float32) / dim))
    factor, low, high = scaling["factor"], scaling["low_freq_factor"], scaling["high_freq_factor"]
    old_context = scaling["original_max_position_embeddings"]
    factors = []
    for freq in freqs:
        wavelength = 2 * math.pi / freq
        if wavelength < old_context / high:
            factors.append(1)
        elif wavelength > old_context / low:
            factors.append(factor)
        else:
            smooth = (old_context / wavelength - low) / (high - low)
            factors.append(1 / ((1 - smooth) / factor + smooth))
    return np.array(factors, dtype=np.float32)


def add_phi3_longrope(writer, config):
    """convert_hf_to_gguf.py's Phi3MiniModel: rope dimension, original context,
    the attention factor it derives, both factor tensors, no sliding window."""
    head_dim = config["hidden_size"] // config["num_attention_heads"]
    original = config["original_max_position_embeddings"]
    scale = config["max_position_embeddings"] / original
    attn_factor = 1.0 if scale <= 1.0 else math.sqrt(1 + math.log(scale) / math.log(original))
    writer.add_rope_dimension_count(head_dim)
    writer.add_rope_scaling_orig_ctx_len(original)
    writer.add_rope_scaling_attn_factors(attn_factor)
    writer.add_sliding_window(0)
    scaling = config["rope_scaling"]
    writer.add_tensor("rope_factors_long.weight", np.array(scaling["long_factor"], dtype=np.float32))
    writer.add_tensor("rope_factors_short.weight", np.array(scaling["short_factor"], dtype=np.float32))


def add_vocabulary(writer, tokenizer, family, vocab, as_converter=False):
    tokens = ["[PAD%d]" % i for i in range(vocab)]
    types = [gguf.TokenType.UNUSED] * vocab
    for text, token_id in tokenizer["model"]["vocab"].items():
        tokens[token_id] = text
        types[token_id] = gguf.TokenType.NORMAL
    for added in tokenizer.get("added_tokens", []):
        tokens[added["id"]] = added["content"]
        types[added["id"]] = gguf.TokenType.CONTROL if added["special"] else gguf.TokenType.USER_DEFINED
    merges = [m if isinstance(m, str) else " ".join(m) for m in tokenizer["model"]["merges"]]
    special = SPECIAL_IDS[family]
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre(special["pre"])
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges(merges)
    writer.add_bos_token_id(special["bos"])
    writer.add_eos_token_id(special["eos"])
    if not as_converter:
        writer.add_add_bos_token(special["add_bos"])
    elif special["add_bos"]:
        # The converter reads the flags from the tokenizer's post-processor,
        # which only a tokenizer that adds a BOS has.
        writer.add_add_bos_token(True)
        writer.add_add_sep_token(False)


def add_converter_general_keys(writer, tensors):
    """What convert_hf_to_gguf.py writes beyond the model's math: the type, a
    size label from the parameter count, the quantisation version."""
    writer.add_type("model")
    writer.add_size_label(gguf.size_label(sum(t.size for t in tensors.values()), 0, 0, 0))
    writer.add_quantization_version(gguf.GGML_QUANT_VERSION)


def k_quant_type(hf_name):
    """llama-quantize's Q4_K_M mix, simplified: Q6_K for the feed-forward's
    down projection and the vocabulary matrices, Q5_K for attention's values,
    Q4_K for the rest."""
    if hf_name.endswith(("down_proj.weight", "lm_head.weight", "embed_tokens.weight")):
        return gguf.GGMLQuantizationType.Q6_K
    if hf_name.endswith("v_proj.weight"):
        return gguf.GGMLQuantizationType.Q5_K
    return gguf.GGMLQuantizationType.Q4_K


def stored(data, outtype, hf_name=""):
    """The tensor as convert_hf_to_gguf.py stores it with --outtype: vectors
    stay f32, matrices become f16 or q8_0 (rows of whole 32-value blocks);
    or, for q4_k_m (which llama-quantize writes, not the converter), the
    K-quants of k_quant_type where the rows are whole 256-value super-blocks
    and q8_0 where they are not."""
    if data.ndim < 2 or outtype == "f32":
        return data, None
    if outtype == "f16":
        return data.astype(np.float16), None
    if outtype == "q4_k_m" and data.shape[-1] % kquant_blocks.SUPER_BLOCK == 0:
        quant_type = k_quant_type(hf_name)
        return kquant_blocks.quantize(data.reshape(-1, data.shape[-1]), quant_type), quant_type
    quantized = gguf.quants.quantize(data, gguf.GGMLQuantizationType.Q8_0)
    return quantized, gguf.GGMLQuantizationType.Q8_0


FILE_TYPE = {"f32": gguf.LlamaFileType.ALL_F32, "f16": gguf.LlamaFileType.MOSTLY_F16,
             "q8_0": gguf.LlamaFileType.MOSTLY_Q8_0, "q4_k_m": gguf.LlamaFileType.MOSTLY_Q4_K_M}


def write_gguf(path, family, config, tensors, tokenizer, name, outtype="f32", as_converter=False):
    """Writes `tensors` ({Hugging Face name: f32 array}) of a `family` model
    whose config.json is `config` (rope_theta and rope_scaling as transformers
    4 writes them) as llama.cpp lays that architecture out, in `outtype` (f32,
    f16, q8_0 or q4_k_m). `as_converter` writes the metadata convert_hf_to_gguf.py
    writes too (add_converter_general_keys) and follows its choices where they
    differ from this script's own: no sliding window for the `llama`
    architecture (Mistral), no rope base for Gemma 2, Gemma 3's local rope
    base, the add-BOS flags only where the tokenizer adds a BOS."""
    vocab = hf.vocab_size_of(tokenizer)
    architecture = ARCHITECTURE[family]
    heads, kv_heads = config["num_attention_heads"], config["num_key_value_heads"]

    writer = gguf.GGUFWriter(path, architecture)
    if as_converter:
        add_converter_general_keys(writer, tensors)
    writer.add_name(name)
    writer.add_block_count(config["num_hidden_layers"])
    writer.add_context_length(config["max_position_embeddings"])
    writer.add_embedding_length(config["hidden_size"])
    writer.add_feed_forward_length(config["intermediate_size"])
    writer.add_head_count(heads)
    writer.add_head_count_kv(kv_heads)
    if not (as_converter and architecture == "gemma2"):
        writer.add_rope_freq_base(config["rope_theta"])
    if as_converter and architecture == "gemma3":
        writer.add_rope_freq_base_swa(config["rope_local_base_freq"])
    writer.add_layer_norm_rms_eps(config["rms_norm_eps"])
    if config.get("sliding_window") and not (as_converter and architecture == "llama"):
        writer.add_sliding_window(config["sliding_window"])
    if "head_dim" in config:
        writer.add_key_length(config["head_dim"])
        writer.add_value_length(config["head_dim"])
    writer.add_file_type(FILE_TYPE[outtype])
    if architecture == "llama":
        writer.add_vocab_size(vocab)
        writer.add_rope_dimension_count(
            config.get("head_dim", config["hidden_size"] // heads))
    if architecture == "phi3":
        add_phi3_longrope(writer, config)
    if architecture == "gemma2":
        writer.add_attn_logit_softcapping(config["attn_logit_softcapping"])
        writer.add_final_logit_softcapping(config["final_logit_softcapping"])
    add_vocabulary(writer, tokenizer, family, vocab, as_converter)

    if family == "llama3":
        writer.add_tensor("rope_freqs.weight", llama3_rope_factors(config))
    for hf_tensor_name in sorted(tensors):
        data = tensors[hf_tensor_name]
        if architecture == "llama" and hf_tensor_name.endswith("self_attn.q_proj.weight"):
            data = permute_to_interleaved(data, heads)
        if architecture == "llama" and hf_tensor_name.endswith("self_attn.k_proj.weight"):
            data = permute_to_interleaved(data, kv_heads)
        if family in hf.GEMMA and hf_tensor_name.endswith("norm.weight"):
            data = data + np.float32(1.0)
        data, raw_dtype = stored(data, outtype, hf_tensor_name)
        writer.add_tensor(gguf_name(hf_tensor_name, family), data, raw_dtype=raw_dtype)

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out_file")
    parser.add_argument("--dtype", choices=["f32", "f16"], default="f32")
    hf.add_arguments(parser)
    args = parser.parse_args()
    if args.tied and args.family != "llama3":
        parser.error("--tied is for --family llama3 (the others have a fixed head)")

    tokenizer = hf.read_tokenizer(args.tokenizer)
    config = hf.config_of(args.family, hf.vocab_size_of(tokenizer), args.tied, "float32",
                          args.sliding_window, args.context)
    tensors = {name: np.array(values, dtype=np.float32).reshape(shape)
               for name, (shape, values) in hf.random_tensors(config, args.family, args.seed).items()}
    # llama.cpp gives a model whose general.name contains "phi3" Phi-3's
    # SentencePiece token attributes, and fails where those tokens are absent.
    family_name = "Phi 3" if args.family == "phi3" else args.family
    write_gguf(args.out_file, args.family, config, tensors, tokenizer,
               "random %s (seed %d)" % (family_name, args.seed), args.dtype)


if __name__ == "__main__":
    main()
