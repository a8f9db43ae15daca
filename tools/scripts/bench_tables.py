#!/usr/bin/env python3
"""The Markdown tables of docs/benchmarks.md, made from the raw reports that
tools/scripts/run_benchmarks.sh writes (so no figure is copied by hand):

    tools/scripts/bench_tables.py docs/data/bench

Every figure is the median of the interleaved runs with their range (min-max).
"""

from __future__ import annotations

import json
import os
import sys


def cell(spread, decimals=1):
    if not spread:
        return "-"
    if spread["min"] == spread["max"]:
        return f"{spread['median']:,.{decimals}f}"
    return (f"{spread['median']:,.{decimals}f} "
            f"({spread['min']:,.{decimals}f}-{spread['max']:,.{decimals}f})")


def load(folder, name):
    path = os.path.join(folder, name + ".json")
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def ratios_in_engine_order(report):
    ratios = report.get("median_ratios", {})
    pairs = [f"{e['engine']} / llama.cpp" for e in report["engines"]]
    return [(pair, ratios[pair]) for pair in pairs if pair in ratios]


def machine(report):
    m = report["machine"]
    return (f"{m['cpu_model']}, {m['logical_cores']} logical cores, ISA: {' '.join(m['isa_flags'])}; "
            f"read bandwidth {m['read_bandwidth_gb_s']:.1f} GB/s with {m['read_bandwidth_threads']} "
            f"threads; kvjit {m['kvjit_commit']}")


def llama_settings(report):
    for engine in report["engines"]:
        if engine["engine"] == "llama.cpp":
            s = engine["settings"]
            return (f"llama.cpp: {s.get('build', '?')}; flash attention {s.get('flash_attn')}, "
                    f"KV {s.get('kv_cache_type')}, threads {s.get('n_threads')}, batch "
                    f"{s.get('n_batch')}, ubatch {s.get('n_ubatch')}")
    return "llama.cpp: not run"


def batch_one(folder, name, title):
    report = load(folder, name)
    if report is None:
        return
    print(f"### {title}\n")
    print(f"Machine: {machine(report)}.  \n{llama_settings(report)}.\n")
    print("| engine | prefill tok/s | decode tok/s | TTFT ms | TPOT ms |")
    print("|---|---:|---:|---:|---:|")
    for engine in report["engines"]:
        s = engine["summary"]
        print(f"| {engine['engine']} | {cell(s.get('prefill_tokens_per_s'))} | "
              f"{cell(s.get('decode_tokens_per_s'))} | {cell(s.get('ttft_ms'), 2)} | "
              f"{cell(s.get('tpot_ms'), 3)} |")
    for pair, ratios in ratios_in_engine_order(report):
        print(f"| **{pair}** | **{ratios['prefill_tokens_per_s']:.2f}** | "
              f"**{ratios['decode_tokens_per_s']:.2f}** | | |")
    print(f"\nRaw runs: `{folder}/{name}.json`.\n")


def load_run(folder, names, title):
    reports = [(name, load(folder, name)) for name in names]
    reports = [(n, r) for n, r in reports if r is not None]
    if not reports:
        return
    print(f"### {title}\n")
    print(f"Machine: {machine(reports[0][1])}.  \n{llama_settings(reports[0][1])}.\n")
    print("| run | engine | output tok/s | TTFT p50 ms | TPOT p50 ms | TPOT p99 ms | steps | "
          "peak KV blocks | prefix-cache hit tokens |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, report in reports:
        for engine in report["engines"]:
            s = engine["summary"]
            print(f"| {name} | {engine['engine']} | {cell(s.get('output_tokens_per_s'))} | "
                  f"{cell(s.get('ttft_ms_p50'), 0)} | {cell(s.get('tpot_ms_p50'))} | "
                  f"{cell(s.get('tpot_ms_p99'))} | {cell(s.get('steps'), 0)} | "
                  f"{cell(s.get('peak_kv_blocks'), 0)} | {cell(s.get('prefix_hit_tokens'), 0)} |")
        for pair, ratios in ratios_in_engine_order(report):
            print(f"| {name} | **{pair}** | **{ratios['output_tokens_per_s']:.2f}** | | | | | | |")
    print(f"\nRaw runs: `{folder}/<run>.json`.\n")


def memory(folder):
    report = load(folder, "memory-smollm2")
    if report is None:
        return
    print("### Peak memory and wall time of a whole run\n")
    print("| configuration | peak RSS MiB | wall s | command |")
    print("|---|---:|---:|---|")
    for name, summary in report["summary"].items():
        command = report["commands"][name].replace(os.path.expanduser("~"), "~")
        print(f"| {name} | {cell(summary['peak_rss_mib'])} | {cell(summary['wall_s'], 3)} | "
              f"`{command}` |")
    print(f"\nRaw runs: `{folder}/memory-smollm2.json`.\n")


def main():
    folder = sys.argv[1] if len(sys.argv) > 1 else "docs/data/bench"
    batch_one(folder, "batch1-smollm2", "SmolLM2-135M-Instruct Q4_1, batch 1")
    batch_one(folder, "batch1-stories260K", "stories260K (f32 weights), batch 1")
    load_run(folder, ["load16-smollm2", "load16-prefix96-smollm2", "load16-prefix96-nocache-smollm2"],
             "SmolLM2, 16 requests at once")
    memory(folder)


if __name__ == "__main__":
    main()
