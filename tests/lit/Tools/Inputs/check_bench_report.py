#!/usr/bin/env python3
"""Checks a `kvjit bench` report written against Inputs/fake_llamacpp.py:

    check_bench_report.py REPORT.json MODE RUNS N_BATCH

every run kept, interleaved engine by engine; medians and ratios computed from
them; the machine described; llama.cpp's settings recorded as given."""

import json
import statistics
import sys

report_path, mode, runs, n_batch = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
report = json.load(open(report_path))
figure = "decode_tokens_per_s" if mode == "batch1" else "output_tokens_per_s"


def check(condition, what):
    if not condition:
        sys.exit(f"check_bench_report.py: {what}")


check(report["mode"] == mode, f"mode {report['mode']}")
engines = [e["engine"] for e in report["engines"]]
check(engines == ["kvjit f32", "kvjit f16", "llama.cpp"], f"engines {engines}")
order = [(m["run"], m["engine"]) for m in report["measurements"]]
check(order == [(r, e) for r in range(runs) for e in engines], f"not interleaved: {order}")
for engine in report["engines"]:
    values = [m[figure] for m in report["measurements"] if m["engine"] == engine["engine"]]
    summary = engine["summary"][figure]
    check(summary["runs"] == runs and summary["median"] == statistics.median(values)
          and summary["min"] == min(values) and summary["max"] == max(values),
          f"{engine['engine']}: summary {summary} of {values}")
llama = report["engines"][2]
# The stand-in's run r gives 100 (r + 1) tokens/s (a tenth of it for decode).
expected_median = statistics.median(100.0 * (r + 1) for r in range(runs)) / (10 if mode == "batch1" else 1)
check(llama["summary"][figure]["median"] == expected_median, f"llama.cpp's median {llama['summary']}")
settings = llama["settings"]
check(settings == {"n_batch": n_batch, "n_ubatch": n_batch, "n_threads": 1, "flash_attn": "on",
                   "kv_cache_type": "f16"}, f"llama.cpp settings {settings}")
for engine, cache in (("kvjit f32", "f32"), ("kvjit f16", "f16")):
    kvjit = next(e for e in report["engines"] if e["engine"] == engine)
    check(kvjit["settings"]["kv_cache"] == cache, f"{engine} settings {kvjit['settings']}")
    ratio = report["median_ratios"][f"{engine} / llama.cpp"][figure]
    expected = kvjit["summary"][figure]["median"] / llama["summary"][figure]["median"]
    check(abs(ratio - expected) <= 1e-9 * expected, f"{engine} ratio {ratio} != {expected}")
machine = report["machine"]
check(machine["cpu_model"] and machine["logical_cores"] >= 1 and machine["read_bandwidth_gb_s"] > 0
      and machine["kvjit_commit"], f"machine {machine}")
print("report ok")
