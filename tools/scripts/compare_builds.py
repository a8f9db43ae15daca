#!/usr/bin/env python3
"""Times two kvjit builds on one model, interleaved, and tables the result.

    tools/scripts/compare_builds.py --before OLD/kvjit --after NEW/kvjit \
        --model MODEL.gguf --out DIR [--rounds 5] [--runs 3]

Each build compiles MODEL into its own .kvx (DIR/before, DIR/after), then
every round runs `kvjit bench` on each executable once at batch 1 and once
as 16 concurrent requests, in alternating order (before first in even
rounds, after first in odd ones), so that a slow spell of the machine lands
on both. Every run's report is kept in DIR as JSON; the table pools the
measured runs of all rounds into a median and its range (min-max), and
gives after / before of the medians.
"""

import argparse
import json
import pathlib
import statistics
import subprocess
import sys

LOADS = {
    "batch 1": ["--prompt_tokens", "128", "--gen_tokens", "64"],
    "16 requests": ["--requests", "16", "--prompt_tokens", "128", "--gen_tokens", "64"],
}
# What each load's table shows; a load run's step and token counts are
# there to show that both builds ran the same schedule.
METRICS = {
    "batch 1": ["prefill_tokens_per_s", "decode_tokens_per_s", "ttft_ms", "tpot_ms"],
    "16 requests": ["output_tokens_per_s", "ttft_ms_p50", "ttft_ms_p99", "tpot_ms_p50", "tpot_ms_p99",
                    "steps", "computed_tokens"],
}


def compile_model(kvjit, model, out_dir):
    out_dir.mkdir(parents=True, exist_ok=True)
    kvx = out_dir / "model.kvx"
    subprocess.run([kvjit, "compile", model, "-o", str(kvx), "--no_verify"], check=True,
                   stdout=subprocess.DEVNULL)
    return kvx


def bench(kvjit, kvx, load_args, runs, threads, report):
    subprocess.run([kvjit, "bench", str(kvx), "--runs", str(runs), "--bench_threads", str(threads),
                    "--report_json", str(report), *load_args], check=True,
                   stdout=subprocess.DEVNULL)


def measured_values(reports):
    """Every measured run's metrics, by name, pooled over the reports."""
    values = {}
    for path in reports:
        for run in json.loads(path.read_text())["measurements"]:
            for key, value in run.items():
                if isinstance(value, (int, float)) and key != "run":
                    values.setdefault(key, []).append(float(value))
    return values


def cell(samples):
    return f"{statistics.median(samples):.2f} ({min(samples):.2f}-{max(samples):.2f})"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True, help="the kvjit binary before the change")
    parser.add_argument("--after", required=True, help="the kvjit binary after the change")
    parser.add_argument("--model", required=True)
    parser.add_argument("--out", required=True, type=pathlib.Path)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--runs", type=int, default=3, help="measured runs per bench, after its warm-up")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()

    builds = {"before": args.before, "after": args.after}
    executables = {name: compile_model(kvjit, args.model, args.out / name) for name, kvjit in builds.items()}
    reports = {(name, load): [] for name in builds for load in LOADS}
    for round_index in range(args.rounds):
        order = ["before", "after"] if round_index % 2 == 0 else ["after", "before"]
        for load, load_args in LOADS.items():
            for name in order:
                report = args.out / f"{name}-{load.replace(' ', '_')}-round{round_index}.json"
                bench(builds[name], executables[name], load_args, args.runs, args.threads, report)
                reports[(name, load)].append(report)
                print(f"round {round_index + 1}/{args.rounds}: {name}, {load}", file=sys.stderr)

    for load in LOADS:
        before = measured_values(reports[("before", load)])
        after = measured_values(reports[("after", load)])
        metrics = METRICS[load]
        print(f"\n{load}: median (min-max) of {len(before[metrics[0]])} runs each\n")
        print("| metric | before | after | after / before |")
        print("|---|---:|---:|---:|")
        for metric in metrics:
            ratio = statistics.median(after[metric]) / statistics.median(before[metric])
            print(f"| {metric} | {cell(before[metric])} | {cell(after[metric])} | {ratio:.3f} |")


if __name__ == "__main__":
    main()
