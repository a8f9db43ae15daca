#!/usr/bin/env python3
"""Prints the ratios table of docs/benchmarks.md from the raw reports that
run_native_ratios.sh leaves in a folder: per measure, the median (min-max)
over the rounds of kvjit's two caches and llama.cpp, and their ratios.
Given several folders, the rounds of all of them together.

    tools/scripts/native_ratios_table.py OUT_DIR [OUT_DIR ...]
"""
import glob
import json
import os
import statistics
import sys


def spread(values):
    return f"{statistics.median(values):.1f} ({min(values):.1f}-{max(values):.1f})"


def rounds(folders, pattern):
    return sorted(path for folder in folders for path in glob.glob(os.path.join(folder, pattern)))


def kvjit_batch1(folders, summary_key):
    figures = {"kvjit f32": [], "kvjit f16": []}
    for path in rounds(folders, "kvjit-batch1-*.json"):
        for engine in json.load(open(path))["engines"]:
            if engine["engine"] in figures:
                figures[engine["engine"]].append(engine["summary"][summary_key]["median"])
    return figures


def kvjit_batched(folders):
    figures = {"kvjit f32": [], "kvjit f16": []}
    for path in rounds(folders, "kvjit-batched16-*.json"):
        for engine in json.load(open(path))["engines"]:
            if engine["engine"] in figures:
                figures[engine["engine"]].append(engine["summary"]["output_tokens_per_s"]["median"])
    return figures


def llama_bench(folders, prompt, pattern="llama-bench-*.json"):
    values = []
    for path in rounds(folders, pattern):
        for entry in json.load(open(path)):
            if (entry["n_prompt"] > 0) == prompt:
                values.append(entry["avg_ts"])
    return values


def llama_batched(folders):
    values = []
    for path in rounds(folders, "llama-batched-*.jsonl"):
        for line in open(path):
            if line.startswith("{") and '"speed_tg"' in line:
                values.append(json.loads(line)["speed_tg"])
    return values


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: native_ratios_table.py OUT_DIR [OUT_DIR ...]")
    folders = sys.argv[1:]
    rows = [
        ("prefill pp128", kvjit_batch1(folders, "prefill_tokens_per_s"), llama_bench(folders, True), "2.0"),
        ("16 concurrent decodes (npp 8, ntg 128, npl 16)", kvjit_batched(folders), llama_batched(folders), "2.0"),
        ("batch-1 decode tg64", kvjit_batch1(folders, "decode_tokens_per_s"), llama_bench(folders, False), "1.6"),
    ]
    # Reports of run_native_ratios.sh before it measured llama.cpp's decode at
    # depth 128 have no such row.
    if rounds(folders, "llama-depth128-*.json"):
        rows.append(("batch-1 decode tg64, both after 128 tokens (llama-bench -d 128)",
                     kvjit_batch1(folders, "decode_tokens_per_s"),
                     llama_bench(folders, False, "llama-depth128-*.json"), "1.6"))
    print("| measure (tok/s, median (min-max) of the rounds) | kvjit f32 cache | kvjit f16 cache | llama.cpp "
          "| ratio f32 / f16 | goal |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, kvjit, llama, goal in rows:
        if not kvjit["kvjit f32"] or not kvjit["kvjit f16"] or not llama:
            sys.exit(f"native_ratios_table.py: {' '.join(folders)} lacks the reports for '{name}'")
        peer = statistics.median(llama)
        ratios = " / ".join(f"{statistics.median(kvjit[e]) / peer:.2f}x" for e in ("kvjit f32", "kvjit f16"))
        print(f"| {name} | {spread(kvjit['kvjit f32'])} | {spread(kvjit['kvjit f16'])} | {spread(llama)} "
              f"| **{ratios}** | ≥ {goal}x |")


if __name__ == "__main__":
    main()
