#!/usr/bin/env python3
"""Peak resident memory and wall time of whole runs, kvjit beside llama.cpp.

    tools/scripts/bench_memory.py --kvjit build/tools/kvjit/kvjit \\
        --llamacpp_bin "$(tools/scripts/build_llamacpp_native.sh | tail -n1)" \\
        --model ~/.cache/kvjit/models/SmolLM2-135M-Instruct.Q4_1.gguf --runs 5 -o report.json

Each configuration generates 32 greedy tokens after the prompt "Hello" at
--threads threads, as a new user would run it, from process start to exit. The
configurations run interleaved (one of each, then again), --runs times; every
run is kept in the JSON and the table gives the median and range. Peak
resident memory is the kernel's count for that one child (ru_maxrss from
wait4), wall time from fork to exit. kvjit's executables are compiled before
the first run, so the runs measure running, not compiling, as llama.cpp's do.

Configurations:
  kvjit                  kvjit's defaults: f32 KV cache, the pool this run can fill
  llama.cpp              llama-completion's defaults: the model's whole context (8,192
                         tokens for SmolLM2), f16 KV cache
  kvjit ctx+KV=llama.cpp kvjit with an f16 KV cache and a pool for llama.cpp's whole
                         context (its pages resident only once written)
  kvjit f16              kvjit's defaults with an f16 KV cache
  llama.cpp -c 512       llama-completion with a 512-token context
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import re
import statistics
import subprocess
import sys
import time
from typing import Dict, List


def measure(command: List[str]) -> Dict[str, float]:
    """One run of `command`, its output discarded: its own peak RSS and wall time."""
    start = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        try:
            os.execv(command[0], command)
        finally:
            os._exit(127)
    _, status, usage = os.wait4(pid, 0)
    wall = time.perf_counter() - start
    if not os.WIFEXITED(status) or os.WEXITSTATUS(status) != 0:
        sys.exit(f"bench_memory.py: `{' '.join(command)}` failed (wait status {status}); run it by hand")
    return {"peak_rss_mib": usage.ru_maxrss / 1024.0, "wall_s": wall}


def spread(values: List[float]) -> Dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values),
            "runs": len(values)}


def model_facts(kvjit: str, model: str) -> Dict[str, int]:
    """The model's context and f16 KV bytes per token, as `kvjit inspect` prints them."""
    text = subprocess.run([kvjit, "inspect", model], capture_output=True, text=True, check=True).stdout
    context = re.search(r"^context\s+(\d+)", text, re.M)
    f16 = re.search(r"^kv cache f16\s+(\d+) bytes/token", text, re.M)
    if not context or not f16:
        sys.exit(f"bench_memory.py: cannot read the context and KV size from `kvjit inspect {model}`")
    return {"context": int(context.group(1)), "f16_kv_bytes_per_token": int(f16.group(1))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kvjit", required=True, help="the kvjit binary")
    parser.add_argument("--llamacpp_bin", required=True, help="the folder of llama.cpp's llama-completion")
    parser.add_argument("--model", required=True, help="the GGUF model")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("-o", "--output", help="also write the report as JSON here")
    args = parser.parse_args()

    kvjit = os.path.abspath(args.kvjit)
    completion = os.path.join(args.llamacpp_bin, "llama-completion")
    facts = model_facts(kvjit, args.model)
    context_pool_mib = math.ceil(facts["context"] * facts["f16_kv_bytes_per_token"] / (1 << 20))
    threads = str(args.threads)
    kvjit_run = [kvjit, "run", args.model, "-p", "Hello", "-n", "32", "--temperature", "0",
                 "--threads", threads]
    llama_run = [completion, "-m", args.model, "-p", "Hello", "-n", "32", "--temp", "0", "-no-cnv",
                 "-t", threads, "-tb", threads]
    configurations = {
        "kvjit": kvjit_run,
        "llama.cpp": llama_run,
        "kvjit ctx+KV=llama.cpp": kvjit_run + ["--cache_dtype", "f16", "--kv_pool_mib", str(context_pool_mib)],
        "kvjit f16": kvjit_run + ["--cache_dtype", "f16"],
        "llama.cpp -c 512": llama_run + ["-c", "512"],
    }
    # Compile kvjit's executables (f32 and f16 caches) into its cache first.
    for command in (configurations["kvjit"], configurations["kvjit f16"]):
        subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)

    runs = []
    for run in range(args.runs):
        for name, command in configurations.items():
            result = measure(command)
            runs.append({"configuration": name, "run": run, **result})
            print(f"run {run + 1}/{args.runs}: {name}: {result['peak_rss_mib']:.1f} MiB, "
                  f"{result['wall_s']:.3f} s", file=sys.stderr)

    summary = {}
    print(f"{args.runs} runs of each, interleaved; median (min-max)")
    print(f"{'configuration':<24} {'peak RSS MiB':>24} {'wall s':>24}")
    for name in configurations:
        rss = spread([r["peak_rss_mib"] for r in runs if r["configuration"] == name])
        wall = spread([r["wall_s"] for r in runs if r["configuration"] == name])
        summary[name] = {"peak_rss_mib": rss, "wall_s": wall}
        print(f"{name:<24} {rss['median']:>8.1f} ({rss['min']:.1f}-{rss['max']:.1f})"
              f"{'':>4} {wall['median']:>8.3f} ({wall['min']:.3f}-{wall['max']:.3f})")

    report = {
        "commands": {name: " ".join(command) for name, command in configurations.items()},
        "model": args.model,
        "model_facts": facts,
        "threads": args.threads,
        "machine": platform.processor() or platform.machine(),
        "summary": summary,
        "runs": runs,
    }
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            json.dump(report, f, indent=1)
            f.write("\n")


if __name__ == "__main__":
    main()
