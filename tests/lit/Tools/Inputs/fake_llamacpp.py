#!/usr/bin/env python3
"""Stands in for tools/scripts/llamacpp_reference.py in kvjit bench's tests: prints
the JSON its `bench` and `bench-load` subcommands print, with figures that change
from run to run (a counter in the file named by $FAKE_LLAMACPP_COUNTER), and the
settings it was given, so a test sees what kvjit bench passed and how it summarized."""

import argparse
import json
import os
import sys

parser = argparse.ArgumentParser()
parser.add_argument("subcommand", choices=["bench", "bench-load"])
parser.add_argument("model")
parser.add_argument("--prompt-tokens", type=int)
parser.add_argument("--gen-tokens", type=int)
parser.add_argument("--requests-file")
parser.add_argument("--threads", type=int, required=True)
parser.add_argument("--n-batch", type=int, required=True)
parser.add_argument("--n-ubatch", type=int, required=True)
parser.add_argument("--flash-attn", required=True)
parser.add_argument("--cache-type", required=True)
args = parser.parse_args()

counter = os.environ["FAKE_LLAMACPP_COUNTER"]
run = int(open(counter).read()) if os.path.exists(counter) else 0
with open(counter, "w") as f:
    f.write(str(run + 1))

settings = {"n_batch": args.n_batch, "n_ubatch": args.n_ubatch, "n_threads": args.threads,
            "flash_attn": args.flash_attn, "kv_cache_type": args.cache_type}
# Runs 0, 1, 2, ... give 100, 200, 300, ... tokens/s: the median of 3 runs is 200.
rate = 100.0 * (run + 1)
if args.subcommand == "bench":
    result = {"engine": "llama.cpp", "prefill_tokens_per_s": rate, "decode_tokens_per_s": rate / 10,
              "ttft_ms": 1e3 * args.prompt_tokens / rate, "tpot_ms": 1e4 / rate}
else:
    requests = json.load(open(args.requests_file))["requests"]
    result = {"engine": "llama.cpp", "requests": len(requests), "output_tokens_per_s": rate,
              "ttft_ms_p50": 5.0, "tpot_ms_p50": 2.0}
result["settings"] = settings
json.dump(result, sys.stdout)
sys.stdout.write("\n")
