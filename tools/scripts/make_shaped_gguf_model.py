#!/usr/bin/env python3
"""Writes a random-weight GGUF with the shapes of a published model, for speed
measurements of models no one has fetched (issue 28's matrix): every matrix
and vocabulary at its real size, weights drawn with numpy, in f16 (or f32,
or bf16 through llama-quantize, or a Q4_K_M mix quantized by numpy), laid out as llama.cpp's converter lays out the
family (make_random_gguf_model.write_gguf). Quantize it with llama.cpp's own
llama-quantize for the other types:

    tools/scripts/make_shaped_gguf_model.py --preset llama-3.2-1b OUT.f16.gguf
    $(tools/scripts/build_llamacpp_native.sh | tail -n1)/llama-quantize OUT.f16.gguf OUT.q4_k_m.gguf Q4_K_M

The text it writes is noise; its speed is the model's: the same matrices, the
same heads, the same vocabulary (the tokenizer is a small byte-level BPE
padded with unused tokens to the preset's vocabulary size).
"""

from __future__ import annotations

import argparse
import copy
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_random_gguf_model as gguf_layout  # noqa: E402
import make_random_hf_model as hf  # noqa: E402

# The shapes of config.json of each published model.
PRESETS = {
    "smollm2-135m": ("llama", dict(hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
                                   num_attention_heads=9, num_key_value_heads=3, vocab_size=49152,
                                   rope_theta=100000.0)),
    "smollm2-360m": ("llama", dict(hidden_size=960, intermediate_size=2560, num_hidden_layers=32,
                                   num_attention_heads=15, num_key_value_heads=5, vocab_size=49152,
                                   rope_theta=100000.0)),
    "llama-3.2-1b": ("llama3", dict(hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
                                    num_attention_heads=32, num_key_value_heads=8, head_dim=64,
                                    vocab_size=128256)),
    "llama-3.2-3b": ("llama3", dict(hidden_size=3072, intermediate_size=8192, num_hidden_layers=28,
                                    num_attention_heads=24, num_key_value_heads=8, head_dim=128,
                                    vocab_size=128256)),
    "qwen2.5-0.5b": ("qwen2", dict(hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
                                   num_attention_heads=14, num_key_value_heads=2, vocab_size=151936,
                                   rope_theta=1000000.0)),
    "qwen2.5-1.5b": ("qwen2", dict(hidden_size=1536, intermediate_size=8960, num_hidden_layers=28,
                                   num_attention_heads=12, num_key_value_heads=2, vocab_size=151936,
                                   rope_theta=1000000.0)),
    "qwen3-0.6b": ("qwen3", dict(hidden_size=1024, intermediate_size=3072, num_hidden_layers=28,
                                 num_attention_heads=16, num_key_value_heads=8, head_dim=128,
                                 vocab_size=151936, rope_theta=1000000.0)),
    "gemma-3-1b": ("gemma3", dict(hidden_size=1152, intermediate_size=6912, num_hidden_layers=26,
                                  num_attention_heads=4, num_key_value_heads=1, head_dim=256,
                                  query_pre_attn_scalar=256, vocab_size=262144,
                                  sliding_window=512, sliding_window_pattern=6)),
    "gemma-2-2b": ("gemma2", dict(hidden_size=2304, intermediate_size=9216, num_hidden_layers=26,
                                  num_attention_heads=8, num_key_value_heads=4, head_dim=256,
                                  query_pre_attn_scalar=256, vocab_size=256000, sliding_window=4096,
                                  attn_logit_softcapping=50.0, final_logit_softcapping=30.0)),
    "phi-3-mini": ("phi3", dict(hidden_size=3072, intermediate_size=8192, num_hidden_layers=32,
                                num_attention_heads=32, num_key_value_heads=32, vocab_size=32064)),
    # Not a published model: the smallest Llama whose every matrix is whole
    # 256-value super-blocks, for tests of the K-quant kernels (--dtype q4_k_m).
    "tiny-kquants": ("llama", dict(hidden_size=256, intermediate_size=512, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, vocab_size=2048,
                                   rope_theta=10000.0)),
}

TOKENIZER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../tests/data/hf_tokenizers",
                         "qwen25_style.tokenizer.json")


def padded_tokenizer(tokenizer, vocab_size):
    """`tokenizer` with one more added token at id vocab_size - 1, so that its
    vocabulary (the ids between unused) is vocab_size tokens."""
    padded = copy.deepcopy(tokenizer)
    if hf.vocab_size_of(padded) > vocab_size:
        sys.exit(f"make_shaped_gguf_model.py: the tokenizer has more than {vocab_size} tokens")
    padded.setdefault("added_tokens", []).append(
        {"id": vocab_size - 1, "content": "<|vocabulary_end|>", "special": True})
    return padded


def random_weights(config, family, seed):
    """{Hugging Face name: f32 array}, drawn as make_random_hf_model draws its
    tiny models' (uniform, norms near 1), with matrices scaled by 1/sqrt(in)
    so that activations stay in range at real widths."""
    rng = np.random.default_rng(seed)
    weights = {}
    for name, shape in hf.tensor_shapes(config, family).items():
        if name.endswith("norm.weight"):
            offset = 0.0 if family in hf.GEMMA else 1.0
            weights[name] = (offset + rng.uniform(-0.2, 0.2, shape)).astype(np.float32)
        elif name.endswith("bias"):
            weights[name] = rng.uniform(-0.2, 0.2, shape).astype(np.float32)
        else:
            scale = 1.0 / np.sqrt(shape[-1])
            weights[name] = (rng.uniform(-1.0, 1.0, shape).astype(np.float32) * np.float32(scale * 1.7))
    return weights


def general_name(preset: str) -> str:
    """The model's general.name. llama.cpp gives a model whose name contains
    "phi-3" or "phi3" Phi-3's SentencePiece token attributes and fails to load
    it where those tokens are absent, as in this byte-level vocabulary."""
    return preset.replace("-", " ") if preset.startswith("phi-3") else preset


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out_file")
    parser.add_argument("--preset", choices=sorted(PRESETS), required=True)
    parser.add_argument("--dtype", choices=["f32", "f16", "q4_k_m"], default="f16",
                        help="q4_k_m: K-quants written by kquant_blocks.py, where llama-quantize is not at hand")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--context", type=int, default=4096)
    args = parser.parse_args()

    family, shape = PRESETS[args.preset]
    tokenizer = padded_tokenizer(hf.read_tokenizer(TOKENIZER), shape["vocab_size"])
    config = hf.config_of(family, shape["vocab_size"], tied=family == "llama3", torch_dtype="float32",
                          context=args.context)
    config.update(shape)
    # SmolLM2 ties its head; the tiny llama doesn't.
    if args.preset.startswith("smollm2"):
        config["tie_word_embeddings"] = True
    if family == "phi3":
        # LongRoPE's divisors, one per rotated pair of the real head size.
        pairs = config["hidden_size"] // config["num_attention_heads"] // 2
        config["rope_scaling"]["short_factor"] = [1.0] * pairs
        config["rope_scaling"]["long_factor"] = [1.0] * pairs
        config["original_max_position_embeddings"] = args.context
    weights = random_weights(config, family, args.seed)
    gguf_layout.write_gguf(args.out_file, family, config, weights, tokenizer,
                           f"random {general_name(args.preset)} shapes (seed {args.seed})", args.dtype,
                           as_converter=True)


if __name__ == "__main__":
    main()
