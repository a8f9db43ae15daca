#!/usr/bin/env python3
"""Writes a tiny random-weight Hugging Face model directory (config.json,
model.safetensors, tokenizer.json or tokenizer.model) of one architecture family, seeded, with
no dependency beyond Python: the models --verify and the family tests run on
without a download.

  make_random_hf_model.py --family qwen2 --dtype f32 --tokenizer T.json OUT_DIR

Families: llama (untied head, rotate-half rope as Hugging Face stores it),
llama3 (Llama 3.1/3.2: rope_scaling of rope_type llama3, theta 500000, untied
head or --tied as Llama 3.2 1B), qwen2 (q/k/v bias, tied embeddings), qwen3
(per-head RMSNorm of q and k, no bias, head_dim 32 != hidden / heads, tied
embeddings), mistral (Llama's layers with a sliding attention window of
--sliding_window positions on every layer, 32 unless given), gemma2 (norms
stored as w for 1 + w, post-attention and post-FFN norms, GELU-tanh,
attention-logit and final-logit soft-capping at caps the random scores and
logits reach, even layers local with a window of 8) and gemma3 (gemma2's
layers without the caps, q/k norms, five local layers to each global one). --context sets
max_position_embeddings (256 unless given). The weights are uniform in ±scale with per-tensor scales that
keep the logits' range near a real model's. make_random_gguf_model.py writes
the same weights as a GGUF file.
"""
import argparse
import json
import os
import random
import shutil
import struct


def float_to_bf16_bits(value):
    bits = struct.unpack("<I", struct.pack("<f", value))[0]
    # Round to nearest even, as torch does.
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) & 0xFFFF


def encode(values, dtype):
    if dtype == "F32":
        return struct.pack("<%df" % len(values), *values)
    if dtype == "F16":
        return struct.pack("<%de" % len(values), *values)
    if dtype == "BF16":
        return struct.pack("<%dH" % len(values), *(float_to_bf16_bits(v) for v in values))
    raise ValueError(dtype)


def tensor_shapes(config, family):
    """{Hugging Face name: shape} of the parameters a `family` model with
    `config` saves, in the order tensors_of draws them."""
    d = config["hidden_size"]
    heads = config["num_attention_heads"]
    kv_heads = config["num_key_value_heads"]
    head_dim = config.get("head_dim") or d // heads
    f = config["intermediate_size"]
    vocab = config["vocab_size"]
    shapes = {"model.embed_tokens.weight": [vocab, d], "model.norm.weight": [d]}
    if not config["tie_word_embeddings"]:
        shapes["lm_head.weight"] = [vocab, d]
    for layer in range(config["num_hidden_layers"]):
        p = "model.layers.%d." % layer
        shapes[p + "input_layernorm.weight"] = [d]
        shapes[p + "post_attention_layernorm.weight"] = [d]
        if family in GEMMA:
            shapes[p + "pre_feedforward_layernorm.weight"] = [d]
            shapes[p + "post_feedforward_layernorm.weight"] = [d]
        if family == "phi3":
            shapes[p + "self_attn.qkv_proj.weight"] = [(heads + 2 * kv_heads) * head_dim, d]
        else:
            shapes[p + "self_attn.q_proj.weight"] = [heads * head_dim, d]
            shapes[p + "self_attn.k_proj.weight"] = [kv_heads * head_dim, d]
            shapes[p + "self_attn.v_proj.weight"] = [kv_heads * head_dim, d]
        shapes[p + "self_attn.o_proj.weight"] = [d, heads * head_dim]
        if family == "qwen2":
            shapes[p + "self_attn.q_proj.bias"] = [heads * head_dim]
            shapes[p + "self_attn.k_proj.bias"] = [kv_heads * head_dim]
            shapes[p + "self_attn.v_proj.bias"] = [kv_heads * head_dim]
        if family in ("qwen3", "gemma3"):
            shapes[p + "self_attn.q_norm.weight"] = [head_dim]
            shapes[p + "self_attn.k_norm.weight"] = [head_dim]
        if family == "phi3":
            shapes[p + "mlp.gate_up_proj.weight"] = [2 * f, d]
        else:
            shapes[p + "mlp.gate_proj.weight"] = [f, d]
            shapes[p + "mlp.up_proj.weight"] = [f, d]
        shapes[p + "mlp.down_proj.weight"] = [d, f]
    return shapes


def tensors_of(config, family, rng):
    def rand(shape, scale):
        count = 1
        for extent in shape:
            count *= extent
        return shape, [rng.uniform(-scale, scale) for _ in range(count)]

    def norm(shape):
        count = shape[0]
        # Gemma stores w for a norm weight of 1 + w.
        offset = 0.0 if family in GEMMA else 1.0
        return shape, [offset + rng.uniform(-0.2, 0.2) for _ in range(count)]

    # Gemma multiplies the embedding by sqrt(hidden) and ties the head to it:
    # smaller rows keep both the residual stream and the logits in range.
    embed_scale = 0.3 if family in GEMMA else 1.0
    tensors = {}
    for name, shape in tensor_shapes(config, family).items():
        if name.endswith("norm.weight"):
            tensors[name] = norm(shape)
        elif name.endswith("bias"):
            tensors[name] = rand(shape, 0.2)
        elif name == "model.embed_tokens.weight":
            tensors[name] = rand(shape, embed_scale)
        elif name == "lm_head.weight":
            tensors[name] = rand(shape, 0.5)
        elif name.endswith("down_proj.weight"):
            tensors[name] = rand(shape, 0.3)
        else:
            tensors[name] = rand(shape, 0.4)
    return tensors


def write_safetensors(path, tensors, dtype, metadata=None):
    """The tensors in the order of their names; `metadata` as the header's
    __metadata__ (torch's save_pretrained writes {"format": "pt"})."""
    header = {"__metadata__": metadata} if metadata else {}
    blobs = []
    offset = 0
    for name in sorted(tensors):
        shape, values = tensors[name]
        blob = encode(values, dtype)
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    header_bytes = json.dumps(header, separators=(",", ":")).encode()
    header_bytes += b" " * (-len(header_bytes) % 8)
    with open(path, "wb") as out:
        out.write(struct.pack("<Q", len(header_bytes)))
        out.write(header_bytes)
        for blob in blobs:
            out.write(blob)


FAMILIES = ["llama", "llama3", "qwen2", "qwen3", "phi3", "mistral", "gemma2", "gemma3"]
GEMMA = ("gemma2", "gemma3")


def add_arguments(parser):
    parser.add_argument("--family", choices=FAMILIES, required=True)
    parser.add_argument("--tokenizer", required=True,
                        help="a tokenizer.json, or a SentencePiece tokenizer.model (a name ending "
                             "in .model), to take the vocabulary of; copied into the directory")
    parser.add_argument("--tied", action="store_true",
                        help="llama3: tie the output head to the embeddings (as Llama 3.2 1B)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--sliding_window", type=int, default=32,
                        help="mistral: the attention window in positions")
    parser.add_argument("--context", type=int, default=256, help="max_position_embeddings")


def read_tokenizer(path):
    with open(path) as tokenizer_file:
        return json.load(tokenizer_file)


def sentencepiece_piece_count(path):
    """The pieces of a SentencePiece ModelProto: its field 1 entries, counted
    by walking the protobuf's top level (no protobuf package needed)."""
    with open(path, "rb") as model_file:
        data = model_file.read()
    position, count = 0, 0

    def varint():
        nonlocal position
        value, shift = 0, 0
        while True:
            byte = data[position]
            position += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                return value

    while position < len(data):
        key = varint()
        wire_type = key & 7
        if wire_type == 0:
            varint()
        elif wire_type == 1:
            position += 8
        elif wire_type == 2:
            length = varint()
            position += length
        elif wire_type == 5:
            position += 4
        else:
            raise ValueError(f"{path}: wire type {wire_type} at byte {position}")
        count += key >> 3 == 1
    return count


def vocab_size_of(tokenizer):
    return max([i for i in tokenizer["model"]["vocab"].values()] +
               [t["id"] for t in tokenizer.get("added_tokens", [])]) + 1


def config_of(family, vocab, tied, torch_dtype, sliding_window=32, context=256):
    """The config.json of a random model of `family`."""
    architecture = {"llama": "LlamaForCausalLM", "llama3": "LlamaForCausalLM",
                    "qwen2": "Qwen2ForCausalLM", "qwen3": "Qwen3ForCausalLM",
                    "phi3": "Phi3ForCausalLM", "mistral": "MistralForCausalLM",
                    "gemma2": "Gemma2ForCausalLM", "gemma3": "Gemma3ForCausalLM"}[family]
    config = {
        "architectures": [architecture],
        "model_type": {"llama3": "llama", "gemma3": "gemma3_text"}.get(family, family),
        "hidden_act": "silu", "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": context,
        "vocab_size": vocab, "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
        "tie_word_embeddings": family in ("qwen2", "qwen3") + GEMMA or tied,
        "torch_dtype": torch_dtype,
    }
    if family == "llama3":
        # Llama 3.2's rule with a short original context, so that the random
        # model's 16-wide heads have pairs kept, blended and divided.
        config["rope_theta"] = 500000.0
        config["rope_scaling"] = {"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0,
                                  "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}
    if family == "qwen3":
        config["head_dim"] = 32
        config["attention_bias"] = False
    if family == "phi3":
        # Phi-3-mini-128k's LongRoPE, scaled down: one divisor per rotated pair
        # (8 for head_dim 16) for contexts within the original 64 tokens and
        # another beyond it; sliding_window null, as in Phi-4-mini.
        factors = random.Random(7)
        pairs = config["hidden_size"] // config["num_attention_heads"] // 2
        config["rope_scaling"] = {
            "type": "longrope",
            "short_factor": [round(factors.uniform(1.0, 1.5), 4) for _ in range(pairs)],
            "long_factor": [round(factors.uniform(1.0, 4.0), 4) for _ in range(pairs)],
        }
        config["original_max_position_embeddings"] = 64
        config["sliding_window"] = None
    if family == "mistral":
        config["sliding_window"] = sliding_window
    if family == "gemma2":
        # Caps low enough that the random model's scores (about ±4) and
        # logits (about ±3) bend: a cap left out changes the logits.
        config.update({
            "hidden_act": "gelu_pytorch_tanh", "hidden_activation": "gelu_pytorch_tanh",
            "num_hidden_layers": 4, "head_dim": 16, "query_pre_attn_scalar": 16,
            "sliding_window": 8, "attn_logit_softcapping": 4.0, "final_logit_softcapping": 10.0,
        })
    if family == "gemma3":
        config.update({
            "hidden_act": "gelu_pytorch_tanh", "hidden_activation": "gelu_pytorch_tanh",
            "num_hidden_layers": 6, "head_dim": 16, "query_pre_attn_scalar": 16,
            "rope_theta": 1000000.0, "rope_local_base_freq": 10000.0,
            "sliding_window": 8, "sliding_window_pattern": 6,
            "final_logit_softcapping": None, "attn_logit_softcapping": None,
        })
    return config


def random_tensors(config, family, seed):
    """{Hugging Face name: (shape, f32 values)}, the same for every --dtype."""
    return tensors_of(config, family, random.Random(seed))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out_dir")
    parser.add_argument("--dtype", choices=["f32", "f16", "bf16"], default="f32")
    add_arguments(parser)
    args = parser.parse_args()
    if args.tied and args.family != "llama3":
        parser.error("--tied is for --family llama3 (the others have a fixed head)")

    sentencepiece = args.tokenizer.endswith(".model")
    vocab_size = (sentencepiece_piece_count(args.tokenizer) if sentencepiece
                  else vocab_size_of(read_tokenizer(args.tokenizer)))
    config = config_of(args.family, vocab_size, args.tied,
                       {"f32": "float32", "f16": "float16", "bf16": "bfloat16"}[args.dtype],
                       args.sliding_window, args.context)
    os.makedirs(args.out_dir, exist_ok=True)
    with open(os.path.join(args.out_dir, "config.json"), "w") as config_file:
        json.dump(config, config_file, indent=1)
    write_safetensors(os.path.join(args.out_dir, "model.safetensors"),
                      random_tensors(config, args.family, args.seed), args.dtype.upper())
    shutil.copyfile(args.tokenizer, os.path.join(
        args.out_dir, "tokenizer.model" if sentencepiece else "tokenizer.json"))


if __name__ == "__main__":
    main()
