#!/usr/bin/env python3
"""Issue 28's performance matrix: kvjit beside llama.cpp built natively for
this CPU, in the same run, model by model, each figure also as a share of the
machine's limit.

    tools/scripts/perf_matrix.py --kvjit build/tools/kvjit/kvjit \\
        --model llama-3.2-1b/Q4_K_M=~/.cache/kvjit/shaped/llama-3.2-1b.q4_k_m.gguf [--model ...] \\
        [--numerics batch-invariant,fast] --rounds 3 --out docs/data/bench/matrix-DATE

--numerics runs kvjit under each CPU numerics (KVJIT_CPU_NUMERICS,
docs/numerics.md) in every round, beside the same llama.cpp runs; a
numerics other than batch-invariant gets rows of its own, "NAME [fast]".

Per model, once: `kvjit bench --profile`, for the bytes a decode step reads
and the FLOPs a prefill token costs, and the machine's measured read
bandwidth and FMA peak at 2 threads. Then --rounds interleaved rounds, each
running in turn (2 threads, f16 KV cache on both sides):
  kvjit bench --prompt_tokens 128 --gen_tokens 128   pp128, tg128 after 128 tokens
  kvjit bench --prompt_tokens 512 --gen_tokens 128   pp512, tg128 after 512 tokens
  kvjit bench --requests 16 --prompt_tokens 8 --gen_tokens 128    16 concurrent decodes
  llama-bench -p 128,512 -n 0                        pp128, pp512
  llama-bench -p 0 -n 128 -d 128,512                 tg128 after 128 and 512 tokens
  llama-batched-bench -npp 8 -ntg 128 -npl 16        16 concurrent decodes
Every report is kept in --out; the table (medians, and kvjit / llama.cpp) is
printed and written as matrix.md, the numbers as matrix.json.

Shares of the limit: a decode figure's tokens/s times the bytes one decode
step reads (weights and activations, and the KV cache at the cell's mean
context: the profile's cost model) over the best read bandwidth the
profiles measured; a prefill figure's tokens/s times the FLOPs per token
(at 128 tokens) over the measured f32 FMA peak, which the int8 (VNNI) GEMMs
of quantized weights can exceed.

The profile rule (issue 28): every instruction kind that takes >= 5% of a
prefill or decode step of the profile run runs at >= 60% of its roofline,
the time its bytes take at the best bandwidth measured or its FLOPs at the
f32 FMA peak, whichever is longer. matrix.md lists, per model and phase,
each such kind's share of the step and of its roofline, and marks those
under 60%.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from typing import Dict, List

CELLS = ["pp128", "pp512", "tg128 @128", "tg128 @512", "16 streams"]


def run(command: List[str], out_path: str, numerics: str = "batch-invariant") -> str:
    env = dict(os.environ, KVJIT_CPU_NUMERICS=numerics)
    done = subprocess.run(command, capture_output=True, text=True, timeout=3600, env=env)
    if done.returncode != 0:
        sys.exit(f"perf_matrix.py: `{' '.join(command)}` failed:\n{done.stderr[-4000:]}")
    with open(out_path, "w") as out:
        out.write(done.stdout)
    return done.stdout


def kvjit_bench(kvjit: str, model: str, numerics: str, report: str, *flags: str) -> Dict:
    run([kvjit, "bench", model, "--runs", "1", "--bench_threads", "2", "--bench_cache_dtypes", "f16",
         "--report_json", report, *flags], report + ".txt", numerics)
    with open(report) as file:
        return json.load(file)


def summary(report: Dict, key: str) -> float:
    return report["engines"][0]["summary"][key]["median"]


def llama_bench(llama_bin: str, model: str, out: str, *flags: str) -> List[Dict]:
    text = run([os.path.join(llama_bin, "llama-bench"), "-m", model, "-t", "2", "-r", "1",
                "-ctk", "f16", "-ctv", "f16", "-o", "json", *flags], out)
    return json.loads(text)


def llama_batched(llama_bin: str, model: str, out: str) -> float:
    text = run([os.path.join(llama_bin, "llama-batched-bench"), "-m", model, "-c", "4096", "-b", "256",
                "-ub", "256", "-npp", "8", "-ntg", "128", "-npl", "16", "-t", "2", "-fa", "on",
                "--output-format", "jsonl"], out)
    for line in text.splitlines():
        if line.startswith("{") and '"speed_tg"' in line:
            return json.loads(line)["speed_tg"]
    sys.exit(f"perf_matrix.py: no result in {out}")


# The profile run: its decode steps follow a prompt of PROFILE_PROMPT tokens.
PROFILE_PROMPT, PROFILE_GEN = 128, 32

# The profile rule's bounds: kinds from this share of a step on must reach
# this share of their roofline.
RULE_MIN_STEP_SHARE, RULE_MIN_ROOFLINE = 0.05, 0.60


def profile_rule(profile: Dict, bandwidth_gb_s: float) -> Dict[str, List[Dict]]:
    """Per phase, the instruction kinds taking >= RULE_MIN_STEP_SHARE of the
    step, each with its share of its roofline."""
    engine = profile["engines"][0]["profile"]
    rows = {}
    for phase in ("prefill", "decode"):
        rows[phase] = []
        for op in engine["phases"][phase]["ops"]:
            if op["share"] < RULE_MIN_STEP_SHARE:
                continue
            roofline = max(op["gb_per_s"] / bandwidth_gb_s, op["gflop_per_s"] / engine["peak_gflop_s"])
            rows[phase].append({"op": op["name"], "share": op["share"], "of_roofline": roofline,
                                "holds": roofline >= RULE_MIN_ROOFLINE})
    return rows


def limits(profile: Dict) -> Dict[str, float]:
    """The machine's limits, from the profile's cost model: the bytes of a
    decode step but its KV cache's, the KV bytes per cached token, and the
    FLOPs per prefill token."""
    phases = profile["engines"][0]["profile"]["phases"]
    decode = phases["decode"]["total"]
    prefill = phases["prefill"]["total"]
    return {"decode_fixed_bytes": decode["weight_bytes"] + decode["activation_bytes"],
            "kv_bytes_per_cached_token": decode["kv_bytes"] / (PROFILE_PROMPT + PROFILE_GEN / 2),
            "prefill_flops_per_token": prefill["flops"] / phases["prefill"]["tokens_per_step"],
            "read_bandwidth_gb_s": profile["engines"][0]["profile"]["read_bandwidth_gb_s"],
            "peak_gflop_s": profile["engines"][0]["profile"]["peak_gflop_s"]}


def limit_tokens_per_s(limit: Dict[str, float], cell: str):
    """A cell's tokens/s at the limit: decode 128 tokens after the cell's
    depth (their mean context: depth + 64), or prefill at the FMA peak."""
    if cell.startswith("pp"):
        return limit["peak_gflop_s"] * 1e9 / limit["prefill_flops_per_token"]
    if cell.startswith("tg"):
        context = int(cell.split("@")[1]) + 64
        step = limit["decode_fixed_bytes"] + limit["kv_bytes_per_cached_token"] * context
        return limit["read_bandwidth_gb_s"] * 1e9 / step
    return None


def tabulate(matrix: Dict, out: str) -> None:
    """The shares against the best bandwidth, into matrix.json; the table,
    printed and into matrix.md."""
    # The read bandwidth a profile measures swings from run to run on a
    # shared machine (34-58 GB/s here); the machine's limit is the best of
    # them, which every decode share is taken against.
    bandwidth = max(model["limits"]["read_bandwidth_gb_s"] for model in matrix["models"].values())
    matrix["read_bandwidth_gb_s"] = bandwidth
    for model in matrix["models"].values():
        for cell, figures in model["cells"].items():
            if cell.startswith("tg"):
                limit = dict(model["limits"], read_bandwidth_gb_s=bandwidth)
                figures["kvjit_share_of_limit"] = figures["kvjit_median"] / limit_tokens_per_s(limit, cell)
    with open(os.path.join(out, "matrix.json"), "w") as file:
        json.dump(matrix, file, indent=1)
    lines = ["| model / weights | " + " | ".join(CELLS) + " |",
             "|---|" + "---|" * len(CELLS)]
    for name, model in matrix["models"].items():
        row = []
        for cell in CELLS:
            c = model["cells"][cell]
            share = f", {c['kvjit_share_of_limit']:.0%} of limit" if c["kvjit_share_of_limit"] else ""
            row.append(f"{c['kvjit_median']:.1f} / {c['llama_median']:.1f} = **{c['ratio']:.2f}×**{share}")
        lines.append(f"| {name} | " + " | ".join(row) + " |")
    lines += ["", f"Profile rule (kinds >= {RULE_MIN_STEP_SHARE:.0%} of a step at >= "
              f"{RULE_MIN_ROOFLINE:.0%} of their roofline; bandwidth {bandwidth:.1f} GB/s): "
              "kind share of the step / share of its roofline, ✗ where it fails", "",
              "| model / weights | prefill (128 tokens) | decode (after 128) |", "|---|---|---|"]
    for name, model in matrix["models"].items():
        profile_path = os.path.join(out, name.replace("/", "-").replace(" [", "-").rstrip("]"),
                                    "kvjit-profile.json")
        if not os.path.exists(profile_path):
            continue
        with open(profile_path) as file:
            rule = profile_rule(json.load(file), bandwidth)
        model["profile_rule"] = rule
        cells = [", ".join(f"{r['op']} {r['share']:.0%} / {r['of_roofline']:.0%}{'' if r['holds'] else ' ✗'}"
                           for r in rule[phase]) for phase in ("prefill", "decode")]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    with open(os.path.join(out, "matrix.json"), "w") as file:
        json.dump(matrix, file, indent=1)
    table = "\n".join(lines)
    print(table)
    with open(os.path.join(out, "matrix.md"), "w") as file:
        file.write(table + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kvjit", required=True)
    parser.add_argument("--llama_bin", help="llama.cpp's bin/ (default: build_llamacpp_native.sh's)")
    parser.add_argument("--model", action="append", default=[], help="NAME=PATH, repeatable")
    parser.add_argument("--tabulate", action="store_true",
                        help="measure nothing: the table of --out's matrix.json again")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--numerics", default="batch-invariant",
                        help="kvjit's CPU numerics, comma-separated: batch-invariant, fast")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    if args.tabulate:
        with open(os.path.join(args.out, "matrix.json")) as file:
            tabulate(json.load(file), args.out)
        return
    if not args.model:
        parser.error("--model NAME=PATH is needed (or --tabulate)")
    llama_bin = args.llama_bin or subprocess.run(
        [os.path.join(os.path.dirname(os.path.abspath(__file__)), "build_llamacpp_native.sh")],
        capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1]
    os.makedirs(args.out, exist_ok=True)
    commit = subprocess.run(["git", "-C", os.path.dirname(os.path.abspath(__file__)), "describe",
                             "--always", "--dirty"], capture_output=True, text=True).stdout.strip()
    matrix = {"commit": commit, "command": sys.argv, "rounds": args.rounds, "models": {}}
    numerics_list = args.numerics.split(",")
    for spec in args.model:
        name, path = spec.split("=", 1)
        path = os.path.expanduser(path)
        rows = {numerics: name if numerics == "batch-invariant" else f"{name} [{numerics}]"
                for numerics in numerics_list}
        folders = {numerics: os.path.join(args.out, row.replace("/", "-").replace(" [", "-").rstrip("]"))
                   for numerics, row in rows.items()}
        limit, kvjit = {}, {}
        for numerics, folder in folders.items():
            os.makedirs(folder, exist_ok=True)
            profile = kvjit_bench(args.kvjit, path, numerics, os.path.join(folder, "kvjit-profile.json"),
                                  "--prompt_tokens", str(PROFILE_PROMPT), "--gen_tokens",
                                  str(PROFILE_GEN), "--profile")
            limit[numerics] = limits(profile)
            kvjit[numerics] = {cell: [] for cell in CELLS}
        llama = {cell: [] for cell in CELLS}
        llama_folder = folders[numerics_list[0]]
        for r in range(1, args.rounds + 1):
            print(f"{name}: round {r}/{args.rounds}", file=sys.stderr, flush=True)
            for numerics, folder in folders.items():
                a = kvjit_bench(args.kvjit, path, numerics, os.path.join(folder, f"kvjit-128-{r}.json"),
                                "--prompt_tokens", "128", "--gen_tokens", "128")
                b = kvjit_bench(args.kvjit, path, numerics, os.path.join(folder, f"kvjit-512-{r}.json"),
                                "--prompt_tokens", "512", "--gen_tokens", "128")
                c = kvjit_bench(args.kvjit, path, numerics, os.path.join(folder, f"kvjit-16-{r}.json"),
                                "--requests", "16", "--prompt_tokens", "8", "--gen_tokens", "128",
                                "--max_batch_tokens", "256")
                ours = kvjit[numerics]
                ours["pp128"].append(summary(a, "prefill_tokens_per_s"))
                ours["tg128 @128"].append(summary(a, "decode_tokens_per_s"))
                ours["pp512"].append(summary(b, "prefill_tokens_per_s"))
                ours["tg128 @512"].append(summary(b, "decode_tokens_per_s"))
                ours["16 streams"].append(summary(c, "output_tokens_per_s"))
            for entry in llama_bench(llama_bin, path, os.path.join(llama_folder, f"llama-pp-{r}.json"),
                                     "-p", "128,512", "-n", "0"):
                llama[f"pp{entry['n_prompt']}"].append(entry["avg_ts"])
            for entry in llama_bench(llama_bin, path, os.path.join(llama_folder, f"llama-tg-{r}.json"),
                                     "-p", "0", "-n", "128", "-d", "128,512"):
                llama[f"tg128 @{entry['n_depth']}"].append(entry["avg_ts"])
            llama["16 streams"].append(
                llama_batched(llama_bin, path, os.path.join(llama_folder, f"llama-batched-{r}.jsonl")))
        for numerics, row in rows.items():
            cells = {}
            for cell in CELLS:
                ours, theirs = statistics.median(kvjit[numerics][cell]), statistics.median(llama[cell])
                limit_tps = limit_tokens_per_s(limit[numerics], cell)
                cells[cell] = {"kvjit": kvjit[numerics][cell], "llama.cpp": llama[cell], "kvjit_median": ours,
                               "llama_median": theirs, "ratio": ours / theirs,
                               "kvjit_share_of_limit": ours / limit_tps if limit_tps else None}
            matrix["models"][row] = {"path": path, "numerics": numerics, "limits": limit[numerics],
                                     "cells": cells}
        with open(os.path.join(args.out, "matrix.json"), "w") as file:
            json.dump(matrix, file, indent=1)

    tabulate(matrix, args.out)

if __name__ == "__main__":
    main()
