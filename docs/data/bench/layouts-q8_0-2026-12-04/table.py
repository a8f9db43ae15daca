#!/usr/bin/env python3
"""The table of docs/benchmarks.md (*Interleaved Q8_0 rows and the tied output
projection on Zen 4*) from run.sh's reports in this folder: per executable,
the median (min-max) over the rounds of prefill, batch-1 decode and 16
concurrent decodes, tok/s."""
import json
import statistics


def spread(values):
    return f"{statistics.median(values):.1f} ({min(values):.1f}-{max(values):.1f})"


for name in "ABXY":
    prefill, decode, batched = [], [], []
    for r in range(1, 6):
        summary = json.load(open(f"{name}-b1-{r}.json"))["engines"][0]["summary"]
        prefill.append(summary["prefill_tokens_per_s"]["median"])
        decode.append(summary["decode_tokens_per_s"]["median"])
        batched.append(json.load(open(f"{name}-b16-{r}.json"))["engines"][0]["summary"]["output_tokens_per_s"]["median"])
    print(f"| {name} | {spread(prefill)} | {spread(decode)} | {spread(batched)} |")
