#!/usr/bin/env python3
"""Tiny random-weight models of each architecture family written with Hugging
Face `transformers`, their reference logits from transformers, and their GGUF
conversions by llama.cpp's own converter: the independent references of
tests/unit/e2e/TransformersFamiliesTest.cpp.

Run it with a python that has torch and transformers (CPU is enough):

  ~/.cache/kvjit/hf-venv/bin/python tools/scripts/make_transformers_models.py \
      --converter ~/.cache/kvjit/llama.cpp-native/llama_cpp_python-0.3.36/vendor/llama.cpp \
      tests/data/transformers

For every model NAME (family, head tying, storage type: FAMILY-STORAGE) it writes

  NAME/                    what save_pretrained writes: config.json,
                           model.safetensors, generation_config.json,
                           tokenizer.json, tokenizer_config.json
  NAME.transformers.json   the greedy run of transformers (eager attention, f32
                           arithmetic whatever the storage type) on every prompt
                           of OUT_DIR/prompts.json, in the layout of
                           llamacpp_reference.py's greedy files: prompt_ids,
                           generated_ids, and each step's top logits
  FAMILY.f32.gguf, FAMILY.q8_0.gguf
                           convert_hf_to_gguf.py --outtype f32 / q8_0 of FAMILY-f32/

llama.cpp's greedy runs on the GGUFs are recorded by llamacpp_reference.py
(tools/scripts/regen_transformers_data.sh runs both).

Weights: torch.manual_seed(seed), then every tensor drawn anew at a scale that
keeps activations near unit size and the largest logits near 10 (the default
init of std 0.02 leaves every logit near 0, where any rounding picks the
greedy token). The seed is the first from 1 whose greedy runs keep every
top-1/top-2 margin above MIN_MARGIN in every storage type of the family.
"""

import argparse
import hashlib
import json
import math
import os
import platform
import subprocess
import sys

import torch
import transformers

HIDDEN = 32
HEADS = 2
KV_HEADS = 1
HEAD_DIM = 16
FFN = 64
LAYERS = 2
CONTEXT = 256
MIN_MARGIN = 0.02
TOP_K = 16

TOKENIZERS = {"llama3_style": {"bos": 0, "eos": 1, "add_bos": True, "pre": "llama-bpe"},
              "qwen25_style": {"bos": 0, "eos": 2, "add_bos": False, "pre": "qwen2"}}


def rope(theta, **scaling):
    return dict({"rope_type": "default", "rope_theta": theta}, **scaling)


def base_config(vocab, tokenizer, **overrides):
    special = TOKENIZERS[tokenizer]
    config = dict(vocab_size=vocab, hidden_size=HIDDEN, intermediate_size=FFN, num_hidden_layers=LAYERS,
                  num_attention_heads=HEADS, num_key_value_heads=KV_HEADS, head_dim=HEAD_DIM,
                  max_position_embeddings=CONTEXT, rms_norm_eps=1e-6, bos_token_id=special["bos"],
                  eos_token_id=special["eos"], pad_token_id=None, tie_word_embeddings=False,
                  rope_parameters=rope(10000.0))
    config.update(overrides)
    return config


def family_configs(vocab):
    """name -> (model class, config class, config kwargs, tokenizer, storage types)."""
    t = transformers
    llama3_rope = rope(500000.0, rope_type="llama3", factor=32.0, low_freq_factor=1.0,
                       high_freq_factor=4.0, original_max_position_embeddings=8192)
    # Phi-3-mini-128k's LongRoPE shrunk: an original context of 16 positions,
    # below every test prompt, so transformers takes the long factors from the
    # first step (it switches on the sequence's length) as kvjit and llama.cpp
    # do for a context of 256.
    factors = torch.Generator().manual_seed(7)
    pairs = HEAD_DIM // 2
    short = [round(1.0 + 0.5 * float(x), 4) for x in torch.rand(pairs, generator=factors)]
    long = [round(1.0 + 3.0 * float(x), 4) for x in torch.rand(pairs, generator=factors)]
    phi3_rope = rope(10000.0, rope_type="longrope", short_factor=short, long_factor=long,
                     original_max_position_embeddings=16)
    gemma_common = dict(hidden_activation="gelu_pytorch_tanh", query_pre_attn_scalar=HEAD_DIM,
                        sliding_window=8)
    return {
        "llama": (t.LlamaForCausalLM, t.LlamaConfig, base_config(vocab, "llama3_style"),
                  "llama3_style", ["f32", "f16"]),
        "llama3": (t.LlamaForCausalLM, t.LlamaConfig,
                   base_config(vocab, "llama3_style", rope_parameters=llama3_rope),
                   "llama3_style", ["f32", "bf16"]),
        "llama3_tied": (t.LlamaForCausalLM, t.LlamaConfig,
                        base_config(vocab, "llama3_style", rope_parameters=llama3_rope,
                                    tie_word_embeddings=True),
                        "llama3_style", ["f32", "bf16"]),
        "qwen2": (t.Qwen2ForCausalLM, t.Qwen2Config,
                  base_config(vocab, "qwen25_style", tie_word_embeddings=True,
                              rope_parameters=rope(1000000.0)),
                  "qwen25_style", ["f32", "bf16"]),
        "qwen3": (t.Qwen3ForCausalLM, t.Qwen3Config,
                  base_config(vocab, "qwen25_style", tie_word_embeddings=True, head_dim=32,
                              rope_parameters=rope(1000000.0)),
                  "qwen25_style", ["f32", "bf16"]),
        "phi3": (t.Phi3ForCausalLM, t.Phi3Config,
                 dict({k: v for k, v in base_config(vocab, "llama3_style", rope_parameters=phi3_rope).items()
                       if k != "head_dim"}, original_max_position_embeddings=16, sliding_window=None),
                 "llama3_style", ["f32", "bf16"]),
        "mistral": (t.MistralForCausalLM, t.MistralConfig,
                    base_config(vocab, "llama3_style", sliding_window=8), "llama3_style", ["f32", "bf16"]),
        "gemma2": (t.Gemma2ForCausalLM, t.Gemma2Config,
                   base_config(vocab, "llama3_style", tie_word_embeddings=True, num_hidden_layers=4,
                               attn_logit_softcapping=50.0, final_logit_softcapping=30.0,
                               layer_types=["sliding_attention", "full_attention"] * 2, **gemma_common),
                   "llama3_style", ["f32", "bf16"]),
        "gemma3": (t.Gemma3ForCausalLM, t.Gemma3TextConfig,
                   base_config(vocab, "llama3_style", tie_word_embeddings=True, num_hidden_layers=6,
                               layer_types=["sliding_attention"] * 5 + ["full_attention"],
                               rope_parameters={"full_attention": rope(1000000.0),
                                                "sliding_attention": rope(10000.0)},
                               **gemma_common),
                   "llama3_style", ["f32", "bf16"]),
    }


def randomize(model, family):
    """Draws every parameter anew (the seed is set by the caller)."""
    gemma = family.startswith("gemma")
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                # Gemma's norms multiply by 1 + w, the others by w.
                p.copy_((0.0 if gemma else 1.0) + torch.empty_like(p).uniform_(-0.2, 0.2))
            elif name.endswith("bias"):
                p.copy_(torch.empty_like(p).uniform_(-0.2, 0.2))
            elif "embed_tokens" in name:
                # Gemma scales the embedding by sqrt(hidden) on the way in.
                p.copy_(torch.randn_like(p) * (0.15 if gemma else 0.5))
            elif name == "lm_head.weight":
                p.copy_(torch.randn_like(p) * 0.5)
            else:  # a linear layer: unit-size outputs from unit-size inputs
                p.copy_(torch.randn_like(p) / math.sqrt(p.shape[1]))
                # A tied head scores the token just read by its embedding's
                # square norm unless the layers outweigh the embedding in the
                # residual stream: without this gain the tied models repeat one
                # token. (Gemma's post norms rescale these outputs anyway.)
                if model.config.tie_word_embeddings and not gemma and name.endswith(
                        ("o_proj.weight", "down_proj.weight")):
                    p.mul_(3.0)


def tokenizer_for(name, source):
    special = TOKENIZERS[name]
    tokenizer = transformers.PreTrainedTokenizerFast(tokenizer_file=source)
    vocab = tokenizer.convert_ids_to_tokens
    tokenizer.bos_token = vocab(special["bos"])
    tokenizer.eos_token = vocab(special["eos"])
    tokenizer.add_bos_token = special["add_bos"]
    return tokenizer


def prompt_ids(tokenizer, name, text):
    ids = tokenizer.encode(text, add_special_tokens=False)
    return ([TOKENIZERS[name]["bos"]] if TOKENIZERS[name]["add_bos"] else []) + ids


def greedy_run(model, ids, new_tokens):
    """Prefill, then one token per step through the KV cache; each step's logits."""
    steps = []
    generated = []
    with torch.no_grad():
        out = model(torch.tensor([ids]), use_cache=True)
        for _ in range(new_tokens):
            logits = out.logits[0, -1].to(torch.float32)
            if not torch.isfinite(logits).all():
                sys.exit("make_transformers_models.py: error: transformers produced non-finite logits")
            top = torch.topk(logits, TOP_K)
            ordered = sorted(zip(top.values.tolist(), top.indices.tolist()), key=lambda p: (-p[0], p[1]))
            steps.append({"top_ids": [i for _, i in ordered], "top_logits": [v for v, _ in ordered]})
            token = ordered[0][1]
            generated.append(token)
            out = model(torch.tensor([[token]]), past_key_values=out.past_key_values, use_cache=True)
    return generated, steps


def sha256_of(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def reference(model_dir, tokenizer, tokenizer_name, prompts, new_tokens, storage):
    # The weights as stored, the arithmetic in f32: kvjit widens stored bf16/f16 to f32 too.
    model = transformers.AutoModelForCausalLM.from_pretrained(
        model_dir, attn_implementation="eager", dtype=torch.float32).eval()
    results = []
    for prompt in prompts:
        ids = prompt_ids(tokenizer, tokenizer_name, prompt["text"])
        generated, steps = greedy_run(model, ids, new_tokens)
        margins = [s["top_logits"][0] - s["top_logits"][1] for s in steps]
        results.append({"name": prompt["name"], "text": prompt["text"], "prompt_ids": ids,
                        "generated_ids": generated, "steps": steps,
                        "min_top1_top2_margin": min(margins)})
    return {"engine": "transformers", "model": os.path.basename(model_dir), "storage": storage,
            "model_sha256": sha256_of(os.path.join(model_dir, "model.safetensors")),
            "settings": {"attn_implementation": "eager", "compute_dtype": "float32",
                         "new_tokens": new_tokens, "top_k": TOP_K, "kv_cache": "DynamicCache"},
            "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                         "python": platform.python_version()},
            "prompts": results}


# Runs convert_hf_to_gguf.py with two of its choices made for it: the
# pre-tokenizer name (it recognises a BPE pre-tokenizer by hashing a known
# model's tokens, and these tokenizers are no known model's), and byte-level
# BPE for Gemma 2 and Phi-3, whose converters expect a SentencePiece
# tokenizer.model these models do not have.
CONVERT = """
import sys
sys.path.insert(0, sys.argv[1])
sys.path.insert(1, sys.argv[1] + "/gguf-py")
import convert_hf_to_gguf
from conversion import base, gemma, phi
pre = sys.argv[2]
base.TextModel.get_vocab_base_pre = lambda self, tokenizer: pre
for model_class in (gemma.Gemma2Model, phi.Phi3MiniModel):
    model_class.set_vocab = base.TextModel._set_vocab_gpt2
sys.argv = ["convert_hf_to_gguf.py"] + sys.argv[3:]
convert_hf_to_gguf.main()
"""


def convert(converter, model_dir, pre, outtype, outfile):
    # llama.cpp sets token attributes by the model's name: a name with "phi3" in it
    # would need Phi-3's SentencePiece tokens.
    subprocess.run([sys.executable, "-c", CONVERT, converter, pre, model_dir, "--outtype", outtype,
                    "--model-name", "kvjit random-weight test model",
                    "--outfile", outfile], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def write_model(out_dir, family, storage, seed, model_class, config, tokenizer, tokenizer_name, prompts,
                new_tokens):
    """Writes NAME/ and NAME.transformers.json; returns the smallest top-1/top-2 margin."""
    name = "%s-%s" % (family, storage)
    model_dir = os.path.join(out_dir, name)
    torch.manual_seed(seed)
    model = model_class(config)
    randomize(model, family)
    dtype = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[storage]
    model.to(dtype).save_pretrained(model_dir)
    tokenizer.save_pretrained(model_dir)
    data = reference(model_dir, tokenizer, tokenizer_name, prompts, new_tokens, storage)
    data["seed"] = seed
    with open(os.path.join(out_dir, name + ".transformers.json"), "w") as f:
        json.dump(data, f, indent=1)
    margin = min(p["min_top1_top2_margin"] for p in data["prompts"])
    print("%s (seed %d): %d bytes of weights, smallest top-1/top-2 margin %.4f" % (
        name, seed, os.path.getsize(os.path.join(model_dir, "model.safetensors")), margin))
    return margin


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out_dir")
    parser.add_argument("--converter", required=True, help="llama.cpp's source folder (convert_hf_to_gguf.py)")
    parser.add_argument("--tokenizers", default=os.path.join(os.path.dirname(__file__), "../../tests/data/hf_tokenizers"))
    parser.add_argument("--only", action="append", help="a family to write (repeatable; default: all)")
    parser.add_argument("-n", type=int, default=16, help="greedy tokens per prompt")
    args = parser.parse_args()

    with open(os.path.join(args.out_dir, "prompts.json")) as f:
        prompts = json.load(f)
    vocab = 2001  # the tokenizers of tests/data/hf_tokenizers: 2,000 BPE tokens and <tool_call>
    for family, (model_class, config_class, kwargs, tokenizer_name, storages) in family_configs(vocab).items():
        if args.only and family not in args.only:
            continue
        tokenizer = tokenizer_for(tokenizer_name, os.path.join(args.tokenizers, tokenizer_name + ".tokenizer.json"))
        assert len(tokenizer) == vocab, len(tokenizer)
        # The first seed whose greedy runs keep every top-1/top-2 margin above
        # MIN_MARGIN in every storage type: rounding cannot then flip a token.
        for seed in range(1, 100):
            written = [write_model(args.out_dir, family, storage, seed, model_class, config_class(**kwargs),
                                   tokenizer, tokenizer_name, prompts, args.n) for storage in storages]
            if min(written) >= MIN_MARGIN:
                break
        else:
            sys.exit("make_transformers_models.py: error: no seed below 100 keeps %s's margins above %g"
                     % (family, MIN_MARGIN))
        for outtype in ("f32", "q8_0"):
            gguf = os.path.join(args.out_dir, "%s.%s.gguf" % (family, outtype))
            convert(args.converter, os.path.join(args.out_dir, family + "-f32"), TOKENIZERS[tokenizer_name]["pre"],
                    outtype, gguf)
            print("%s: %d bytes" % (gguf, os.path.getsize(gguf)))


if __name__ == "__main__":
    main()
