#!/usr/bin/env python3
"""The transformers side of tests/data/transformers: each family's config
files as transformers writes them, the seed of its numpy-written weights,
transformers' reference runs on them, and the check that llama.cpp's own
converter writes the GGUFs write_transformers_weights.py writes.

Run it with a python that has torch and transformers (CPU is enough);
regen_transformers_data.sh does:

  ~/.cache/kvjit/hf-venv/bin/python tools/scripts/make_transformers_models.py \
      --converter ~/.cache/kvjit/llama.cpp-native/llama_cpp_python-0.3.36/vendor/llama.cpp \
      --work WORK_DIR --writer_python python3 tests/data/transformers

For every model NAME (family, head tying, storage type: FAMILY-STORAGE):

  OUT_DIR/NAME/            config.json and generation_config.json of a model
                           of the family saved by save_pretrained (its weights
                           are not kept), tokenizer.json and tokenizer_config.json
  WORK_DIR/NAME/, WORK_DIR/FAMILY.{f32,q8_0}.gguf
                           the weights write_transformers_weights.py writes
                           with --writer_python (numpy and gguf: what the test
                           runs), checked: transformers loads the folder and
                           save_pretrained writes it again byte for byte;
                           convert_hf_to_gguf.py --outtype f32 / q8_0 of
                           WORK_DIR/FAMILY-f32 holds the same tensors and
                           metadata as each GGUF (gguf_equal.py)
  OUT_DIR/NAME.transformers.json
                           the greedy run of transformers (eager attention, f32
                           arithmetic whatever the storage type) on every prompt
                           of OUT_DIR/prompts.json, in the layout of
                           llamacpp_reference.py's greedy files: prompt_ids,
                           generated_ids, and each step's top logits
  OUT_DIR/weights.json     each family's seed and its files' sha256

The seed of a family is the first from 1 that no other family has whose
greedy runs keep every top-1/top-2 margin above MIN_MARGIN in every storage
type of the family (the weights' scales, write_transformers_weights.py, keep
activations near unit size and the largest logits near 10: transformers'
default init of std 0.02 leaves every logit near 0, where any rounding picks
the greedy token).
llama.cpp's greedy runs on the GGUFs are recorded by llamacpp_reference.py
(regen_transformers_data.sh runs both).
"""

import argparse
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile

import safetensors.torch
import torch
import transformers

SCRIPTS = os.path.dirname(os.path.abspath(__file__))

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


def write_config_files(out_dir, name, model_class, config, tokenizer, dtype):
    """config.json and generation_config.json as save_pretrained writes them
    (the weights it writes with them are dropped), and the tokenizer's files."""
    model_dir = os.path.join(out_dir, name)
    with tempfile.TemporaryDirectory() as saved:
        model_class(config).to(dtype).save_pretrained(saved)
        os.makedirs(model_dir, exist_ok=True)
        for kept in ("config.json", "generation_config.json"):
            shutil.copyfile(os.path.join(saved, kept), os.path.join(model_dir, kept))
    tokenizer.save_pretrained(model_dir)


def check_saved_alike(model_dir):
    """transformers loads the numpy-written folder and writes it again: the
    same model.safetensors, so its names, dtypes, shapes and bytes are what
    save_pretrained writes."""
    written = os.path.join(model_dir, "model.safetensors")
    model = transformers.AutoModelForCausalLM.from_pretrained(model_dir, dtype="auto")
    with tempfile.TemporaryDirectory() as saved:
        model.save_pretrained(saved)
        if sha256_of(os.path.join(saved, "model.safetensors")) == sha256_of(written):
            return
        ours, theirs = safetensors.torch.load_file(written), safetensors.torch.load_file(
            os.path.join(saved, "model.safetensors"))
    differences = sorted(set(ours) ^ set(theirs)) + sorted(
        n for n in set(ours) & set(theirs)
        if ours[n].dtype != theirs[n].dtype or ours[n].shape != theirs[n].shape or not torch.equal(ours[n], theirs[n]))
    sys.exit("make_transformers_models.py: error: save_pretrained writes %s otherwise; tensors that differ: %s"
             % (written, ", ".join(differences) or "none (the header or its order)"))


def write_weights(writer_python, work_dir, family, seed, update_manifest=False):
    command = [writer_python, os.path.join(SCRIPTS, "write_transformers_weights.py"), work_dir,
               "--only", family, "--seed", str(seed)]
    subprocess.run(command + (["--update_manifest"] if update_manifest else []), check=True)


def check_converter_writes_alike(converter, writer_python, work_dir, family, pre):
    """convert_hf_to_gguf.py's GGUFs of WORK_DIR/FAMILY-f32 hold what
    write_transformers_weights.py wrote."""
    with tempfile.TemporaryDirectory() as converted:
        for outtype in ("f32", "q8_0"):
            gguf = os.path.join(converted, "%s.%s.gguf" % (family, outtype))
            convert(converter, os.path.join(work_dir, family + "-f32"), pre, outtype, gguf)
            ours = os.path.join(work_dir, os.path.basename(gguf))
            subprocess.run([writer_python, os.path.join(SCRIPTS, "gguf_equal.py"), gguf, ours], check=True)
            print("%s: equal to convert_hf_to_gguf.py --outtype %s" % (ours, outtype))


def manifest_families(out_dir):
    path = os.path.join(out_dir, "weights.json")
    if not os.path.exists(path):
        return {}
    with open(path) as f:
        return json.load(f)["families"]


def forget_seeds(out_dir, families):
    """Drops the families about to be written from the manifest, so that their
    seeds are searched anew (write_transformers_weights.py records them)."""
    kept = {name: entry for name, entry in manifest_families(out_dir).items() if name not in families}
    with open(os.path.join(out_dir, "weights.json"), "w") as f:
        json.dump({"families": kept}, f, indent=1)
        f.write("\n")


def seeds_of_other_families(out_dir, family):
    return {entry["seed"] for name, entry in manifest_families(out_dir).items() if name != family}


def write_reference(out_dir, work_dir, name, storage, seed, tokenizer, tokenizer_name, prompts, new_tokens):
    """Writes NAME.transformers.json; returns the smallest top-1/top-2 margin."""
    model_dir = os.path.join(work_dir, name)
    check_saved_alike(model_dir)
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
    parser.add_argument("--work", required=True, help="where the weights are written")
    parser.add_argument("--writer_python", default="python3",
                        help="a python with numpy and gguf for write_transformers_weights.py")
    parser.add_argument("--tokenizers", default=os.path.join(SCRIPTS, "../../tests/data/hf_tokenizers"))
    parser.add_argument("--only", action="append", help="a family to write (repeatable; default: all)")
    parser.add_argument("-n", type=int, default=16, help="greedy tokens per prompt")
    args = parser.parse_args()
    transformers.utils.logging.disable_progress_bar()

    with open(os.path.join(args.out_dir, "prompts.json")) as f:
        prompts = json.load(f)
    vocab = 2001  # the tokenizers of tests/data/hf_tokenizers: 2,000 BPE tokens and <tool_call>
    dtypes = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
    families = {family: how for family, how in family_configs(vocab).items() if not args.only or family in args.only}
    forget_seeds(args.out_dir, families)
    for family, (model_class, config_class, kwargs, tokenizer_name, storages) in families.items():
        tokenizer = tokenizer_for(tokenizer_name, os.path.join(args.tokenizers, tokenizer_name + ".tokenizer.json"))
        assert len(tokenizer) == vocab, len(tokenizer)
        names = {storage: "%s-%s" % (family, storage) for storage in storages}
        for storage, name in names.items():
            write_config_files(args.out_dir, name, model_class, config_class(**kwargs), tokenizer, dtypes[storage])
        # The first seed no other family has whose greedy runs keep every
        # top-1/top-2 margin above MIN_MARGIN in every storage type: rounding
        # cannot then flip a token. (Llama 2's, Llama 3's and Mistral's
        # tensors have the same names and shapes: one seed would give them
        # the same weights.)
        for seed in (s for s in range(1, 100) if s not in seeds_of_other_families(args.out_dir, family)):
            write_weights(args.writer_python, args.work, family, seed)
            margins = [write_reference(args.out_dir, args.work, name, storage, seed, tokenizer, tokenizer_name,
                                       prompts, args.n) for storage, name in names.items()]
            if min(margins) >= MIN_MARGIN:
                break
        else:
            sys.exit("make_transformers_models.py: error: no seed below 100 keeps %s's margins above %g"
                     % (family, MIN_MARGIN))
        write_weights(args.writer_python, args.work, family, seed, update_manifest=True)
        check_converter_writes_alike(args.converter, args.writer_python, args.work, family,
                                     TOKENIZERS[tokenizer_name]["pre"])


if __name__ == "__main__":
    main()
