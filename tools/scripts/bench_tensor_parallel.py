#!/usr/bin/env python3
"""One process at 2 threads against two tensor-parallel ranks at 1 thread each.

    tools/scripts/bench_tensor_parallel.py --kvjit build/tools/kvjit/kvjit \\
        --model ~/.cache/kvjit/models/SmolLM2-135M-Instruct.Q4_1.gguf --rounds 3 -o tp.json

For each model, `kvjit bench` runs, interleaved (one of each configuration,
then again), --rounds times:
  batch 1     --prompt_tokens P --gen_tokens G: prefill tokens/s (TTFT) and
              decode tokens/s (TPOT)
  16 streams  --requests 16 --prompt_tokens P --gen_tokens G: output tokens/s,
              TTFT and TPOT p50
in two configurations: `tp1` (one process, --bench_threads 2) and `tp2`
(`--tp 2`, which starts two ranks under mpirun, --bench_threads 1 each). Both
executables are compiled before the first round. Every run's JSON report is
kept in the output, and the table gives the median and range of each figure.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from typing import Dict, List

CONFIGURATIONS = {
    "tp1": ["--bench_threads", "2"],
    "tp2": ["--tp", "2", "--bench_threads", "1"],
}
MODES = {
    "batch1": [],
    "16 streams": ["--requests", "16"],
}
# The figures of each mode's report summary, as the table shows them.
FIGURES = {
    "batch1": ["prefill_tokens_per_s", "decode_tokens_per_s", "ttft_ms", "tpot_ms"],
    "16 streams": ["output_tokens_per_s", "ttft_ms_p50", "tpot_ms_p50"],
}


def bench(kvjit: str, model: str, flags: List[str]) -> Dict:
    with tempfile.TemporaryDirectory() as folder:
        report = os.path.join(folder, "report.json")
        command = [kvjit, "bench", model, "--runs", "1", "--report_json", report, *flags]
        done = subprocess.run(command, capture_output=True, text=True, timeout=1800)
        if done.returncode != 0:
            sys.exit(f"bench_tensor_parallel.py: `{' '.join(command)}` failed:\n{done.stderr}")
        with open(report) as file:
            return json.load(file)


def spread(values: List[float]) -> Dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kvjit", required=True)
    parser.add_argument("--model", action="append", required=True, help="repeatable")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--prompt_tokens", type=int, default=128)
    parser.add_argument("--gen_tokens", type=int, default=64)
    parser.add_argument("-o", "--output", required=True)
    args = parser.parse_args()
    shape = ["--prompt_tokens", str(args.prompt_tokens), "--gen_tokens", str(args.gen_tokens)]

    results = {"command": sys.argv, "rounds": args.rounds, "models": {}}
    for model in args.model:
        name = os.path.basename(model)
        # Compiles both executables (and checks them) before any timed round.
        for flags in CONFIGURATIONS.values():
            bench(args.kvjit, model, [*flags, "--prompt_tokens", "8", "--gen_tokens", "2"])
        runs = {mode: {config: [] for config in CONFIGURATIONS} for mode in MODES}
        for round_number in range(args.rounds):
            for mode, mode_flags in MODES.items():
                for config, flags in CONFIGURATIONS.items():
                    report = bench(args.kvjit, model, [*flags, *mode_flags, *shape])
                    runs[mode][config].append(report)
                    print(f"{name}: round {round_number + 1}/{args.rounds}, {mode}, {config}",
                          file=sys.stderr, flush=True)
        summary = {}
        for mode, by_config in runs.items():
            summary[mode] = {}
            for config, reports in by_config.items():
                summary[mode][config] = {
                    figure: spread([r["engines"][0]["summary"][figure]["median"] for r in reports])
                    for figure in FIGURES[mode]}
        results["models"][name] = {"summary": summary, "runs": runs}
        print(f"\n{name}, {args.rounds} interleaved rounds, median (min-max)")
        for mode in MODES:
            for figure in FIGURES[mode]:
                cells = [f"{config} {s['median']:.1f} ({s['min']:.1f}-{s['max']:.1f})"
                         for config, s in ((c, summary[mode][c][figure]) for c in CONFIGURATIONS)]
                ratio = summary[mode]["tp2"][figure]["median"] / summary[mode]["tp1"][figure]["median"]
                print(f"  {mode:10s} {figure:22s} " + "  ".join(cells) + f"  tp2/tp1 {ratio:.2f}")
    with open(args.output, "w") as file:
        json.dump(results, file, indent=1)


if __name__ == "__main__":
    main()
