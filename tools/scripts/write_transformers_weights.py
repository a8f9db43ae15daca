#!/usr/bin/env python3
"""Writes the weights of tests/data/transformers' random-weight models with
numpy and llama.cpp's `gguf` package alone (scripts/setup.sh's pins), and
checks each file it writes against the sha256 manifest beside the references
(tests/data/transformers/weights.json), so that the references provably
describe the files a test runs:

  write_transformers_weights.py OUT_DIR [--only NAME]...

For every family (its seed from the manifest) it writes

  OUT_DIR/FAMILY-STORAGE/   the committed config.json, generation_config.json,
                            tokenizer.json and tokenizer_config.json of
                            tests/data/transformers/FAMILY-STORAGE, and
                            model.safetensors as transformers' save_pretrained
                            writes it: the same tensor names, dtypes, shapes
                            and bytes (regen_transformers_data.sh checks)
  OUT_DIR/FAMILY.f32.gguf, FAMILY.q8_0.gguf
                            those weights laid out as llama.cpp's
                            convert_hf_to_gguf.py --outtype f32 / q8_0 lays
                            out FAMILY-f32/ (make_random_gguf_model.write_gguf;
                            regen_transformers_data.sh checks each tensor and
                            key equal to the converter's)

NAME is a family (llama3), a folder (llama3-bf16) or a GGUF (llama3.q8_0.gguf).
A file whose sha256 is not the manifest's is an error naming it.
regen_transformers_data.sh picks the seeds (--seed, no check) and records
them and the files' sha256 (--update_manifest).

Weights: np.random.default_rng(seed), each tensor drawn in turn in the order
of its name, in float64, rounded to f32: linear weights normal with std
1/sqrt(fan-in) (3/sqrt(fan-in) for the output projections o_proj and
down_proj of the tied models but Gemma), biases and norm weights uniform in
+-0.2 (around 1, around 0 for Gemma's 1 + w), embeddings normal with std 0.5
(0.15 for Gemma), the untied head std 0.5. f16 and bf16 folders hold the f32
weights rounded to nearest even, as torch's `to(dtype)` rounds them.
"""
import argparse
import hashlib
import json
import os
import shutil
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_random_gguf_model as gguf_layout  # noqa: E402
import make_random_hf_model as hf  # noqa: E402

DATA = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../tests/data/transformers"))
MANIFEST = "weights.json"
# family -> (make_random_gguf_model's family for the GGUF layout, storage types of the folders)
FAMILIES = {
    "llama": ("llama", ["f32", "f16"]),
    "llama3": ("llama3", ["f32", "bf16"]),
    "llama3_tied": ("llama3", ["f32", "bf16"]),
    "qwen2": ("qwen2", ["f32", "bf16"]),
    "qwen3": ("qwen3", ["f32", "bf16"]),
    "phi3": ("phi3", ["f32", "bf16"]),
    "mistral": ("mistral", ["f32", "bf16"]),
    "gemma2": ("gemma2", ["f32", "bf16"]),
    "gemma3": ("gemma3", ["f32", "bf16"]),
}
GGUF_OUTTYPES = ["f32", "q8_0"]
# The files beside model.safetensors that save_pretrained wrote, committed.
TEXT_FILES = ["config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json"]
# llama.cpp gives a model whose general.name contains "phi3" Phi-3's
# SentencePiece token attributes: a name that names no family.
GGUF_NAME = "kvjit random-weight test model"


def fail(message):
    sys.exit("write_transformers_weights.py: error: " + message)


def read_json(path):
    with open(path) as f:
        return json.load(f)


def random_weights(family, config, seed):
    """{name: f32 array}, drawn in the order of the names."""
    rng = np.random.default_rng(seed)
    gemma = family in hf.GEMMA
    weights = {}
    for name, shape in sorted(hf.tensor_shapes(config, FAMILIES[family][0]).items()):
        if name.endswith("norm.weight"):
            values = (0.0 if gemma else 1.0) + rng.uniform(-0.2, 0.2, shape)
        elif name.endswith("bias"):
            values = rng.uniform(-0.2, 0.2, shape)
        elif name == "model.embed_tokens.weight":
            # Gemma multiplies the embedding by sqrt(hidden) on the way in.
            values = rng.standard_normal(shape) * (0.15 if gemma else 0.5)
        elif name == "lm_head.weight":
            values = rng.standard_normal(shape) * 0.5
        else:  # a linear layer: unit-size outputs from unit-size inputs
            values = rng.standard_normal(shape) / np.sqrt(shape[1])
            # A tied head scores the token just read by its embedding's square
            # norm unless the layers outweigh the embedding in the residual
            # stream: without this gain the tied models repeat one token.
            # (Gemma's post norms rescale these outputs anyway.)
            if config["tie_word_embeddings"] and not gemma and name.endswith(
                    ("o_proj.weight", "down_proj.weight")):
                values = values * 3.0
        weights[name] = values.astype(np.float32)
    return weights


def layout_config(config):
    """transformers 5's config.json in the keys write_gguf reads: rope_theta
    and rope_scaling from rope_parameters (Gemma 3: the global layers' base,
    and the local layers' as rope_local_base_freq)."""
    flat = dict(config)
    rope = config["rope_parameters"]
    if "full_attention" in rope:
        flat["rope_theta"] = rope["full_attention"]["rope_theta"]
        flat["rope_local_base_freq"] = rope["sliding_attention"]["rope_theta"]
    else:
        flat["rope_theta"] = rope["rope_theta"]
        if rope["rope_type"] != "default":
            flat["rope_scaling"] = rope
    return flat


def files_of(family):
    """The files written for a family, relative to OUT_DIR."""
    storages = FAMILIES[family][1]
    return (["%s-%s/model.safetensors" % (family, s) for s in storages] +
            ["%s.%s.gguf" % (family, t) for t in GGUF_OUTTYPES])


def write_file(out_dir, family, relative, weights):
    """Writes one file of files_of(family) (and a folder's text files)."""
    path = os.path.join(out_dir, relative)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if relative.endswith(".gguf"):
        source = os.path.join(DATA, family + "-f32")
        config = read_json(os.path.join(source, "config.json"))
        tokenizer = hf.read_tokenizer(os.path.join(source, "tokenizer.json"))
        outtype = relative.split(".")[1]
        gguf_layout.write_gguf(path, FAMILIES[family][0], layout_config(config), weights, tokenizer,
                               GGUF_NAME, outtype, as_converter=True)
        return path
    folder = os.path.dirname(relative)
    for text in TEXT_FILES:
        shutil.copyfile(os.path.join(DATA, folder, text), os.path.join(out_dir, folder, text))
    # What save_pretrained writes: torch's header metadata, f16 and bf16
    # rounded to nearest even from f32 as torch rounds them.
    tensors = {name: (list(values.shape), values.ravel().tolist()) for name, values in weights.items()}
    hf.write_safetensors(path, tensors, folder.rsplit("-", 1)[1].upper(), metadata={"format": "pt"})
    return path


def sha256_of(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def selected(only):
    """{family: [relative file]} for --only (every file of every family without it)."""
    chosen = {}
    for name in only or FAMILIES:
        family = name.split(".")[0].rsplit("-", 1)[0]
        if family not in FAMILIES:
            fail("%s names no model of %s (families: %s)" % (name, DATA, ", ".join(FAMILIES)))
        wanted = [f for f in files_of(family) if name in (family, f, f.split("/")[0])]
        if not wanted:
            fail("%s names no model of %s (%s)" % (name, DATA, ", ".join(files_of(family))))
        chosen.setdefault(family, [])
        chosen[family] += [f for f in wanted if f not in chosen[family]]
    return chosen


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out_dir")
    parser.add_argument("--only", action="append", help="a family, folder or GGUF to write (repeatable)")
    parser.add_argument("--seed", type=int, help="this seed instead of the manifest's, unchecked (with --only)")
    parser.add_argument("--update_manifest", action="store_true",
                        help="record the seeds and the written files' sha256 in the manifest")
    parser.add_argument("--manifest", default=os.path.join(DATA, MANIFEST), help="the sha256 manifest")
    args = parser.parse_args()
    if args.seed is not None and not args.only:
        parser.error("--seed needs --only: it is one family's seed")

    manifest_path = args.manifest
    manifest = read_json(manifest_path) if os.path.exists(manifest_path) else {"families": {}}
    for family, files in selected(args.only).items():
        recorded = manifest["families"].get(family)
        seed = args.seed
        if seed is None:
            if recorded is None:
                fail("%s records no seed for %s (regen_transformers_data.sh writes it)" % (manifest_path, family))
            seed = recorded["seed"]
        weights = random_weights(family, read_json(os.path.join(DATA, family + "-f32", "config.json")), seed)
        sha256 = {}
        for relative in files:
            path = write_file(args.out_dir, family, relative, weights)
            sha256[relative] = sha256_of(path)
            if args.seed is None and not args.update_manifest and sha256[relative] != recorded["sha256"].get(relative):
                fail("%s has sha256 %s where %s records %s for %s (seed %d): these are not the weights the "
                     "references describe" % (path, sha256[relative], manifest_path,
                                              recorded["sha256"].get(relative), relative, seed))
        if args.update_manifest:
            entry = manifest["families"].setdefault(family, {"seed": seed, "sha256": {}})
            if entry["seed"] != seed:
                entry.update(seed=seed, sha256={})
            entry["sha256"].update(sha256)
    if args.update_manifest:
        manifest["families"] = dict(sorted(manifest["families"].items()))
        with open(manifest_path, "w") as f:
            json.dump(manifest, f, indent=1)
            f.write("\n")


if __name__ == "__main__":
    main()
