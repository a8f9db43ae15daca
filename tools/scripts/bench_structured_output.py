#!/usr/bin/env python3
"""Times structured output: `kvjit bench --requests_json` with 1 and 16
concurrent requests, each decoded under a JSON schema and without one, in
interleaved rounds. Prints per cell the median TPOT and decode tokens/s
(min-max) of both, and under the schema the masks xgrammar computed beside
the steps: ms per mask, their time as a share of the decode steps' time, and
the share the steps waited for them (the overhead a request sees). Writes the
raw figures as JSON.

  python3 tools/scripts/bench_structured_output.py KVJIT MODEL SCHEMA ROUNDS OUT.json
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile

K, M, schema, rounds, out_path = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
PEOPLE = ["a pilot", "a baker", "a poet", "a nurse", "a farmer", "a judge", "a miner", "a tailor",
          "a sailor", "a chemist", "a dancer", "a mason", "a clerk", "a potter", "a singer", "a smith"]
counts = [1, 16]
workdir = tempfile.mkdtemp(prefix="kvjit-structured-")
request_files = {}
for n in counts:
  path = os.path.join(workdir, f"requests{n}.json")
  with open(path, "w") as f:
    json.dump([{"prompt": f"Describe {PEOPLE[i]} as a JSON user record.", "max_new_tokens": 64}
               for i in range(n)], f)
  request_files[n] = path
configs = {"plain": [], "schema": ["--json_schema", schema]}
FIELDS = ["tpot_ms_p50", "decode_tokens_per_s", "output_tokens_per_s", "generated_tokens",
          "grammar_masks", "grammar_mask_ms", "grammar_mask_share", "grammar_wait_share"]


def run(requests_path, flags):
  report = os.path.join(workdir, "report.json")
  res = subprocess.run([K, "bench", M, "--requests_json", requests_path, "--runs", "1",
                        "--bench_threads", "2", "--bench_cache_dtypes", "f32", "--report_json",
                        report, *flags], capture_output=True, text=True)
  if res.returncode != 0:
    sys.exit(f"kvjit bench {' '.join(flags)} failed:\n{res.stderr}")
  with open(report) as f:
    summary = json.load(f)["engines"][0]["summary"]
  return {field: summary[field]["median"] for field in FIELDS}


raw = {f"x{n}": {c: [] for c in configs} for n in counts}
for r in range(rounds):
  for n in counts:
    # Alternate which goes first, so that neither always runs on a warmer cache.
    order = list(configs) if r % 2 == 0 else list(reversed(configs))
    for c in order:
      raw[f"x{n}"][c].append(run(request_files[n], configs[c]))


def spread(runs, field, digits=2):
  v = [x[field] for x in runs]
  return {"median": round(statistics.median(v), digits), "min": round(min(v), digits),
          "max": round(max(v), digits)}


summary = {}
for cell, by_config in raw.items():
  plain_tpot = statistics.median(x["tpot_ms_p50"] for x in by_config["plain"])
  for c, runs in by_config.items():
    entry = {"tpot_ms": spread(runs, "tpot_ms_p50"), "decode_tokens_per_s": spread(runs, "decode_tokens_per_s", 1),
             "tpot_ratio": round(statistics.median(x["tpot_ms_p50"] for x in runs) / plain_tpot, 3),
             "generated_tokens": statistics.median(x["generated_tokens"] for x in runs)}
    if c != "plain":
      entry["mask_ms"] = spread(runs, "grammar_mask_ms", 4)
      entry["mask_share_of_decode"] = spread(runs, "grammar_mask_share", 4)
      entry["wait_share_of_decode"] = spread(runs, "grammar_wait_share", 4)
    summary.setdefault(cell, {})[c] = entry
print(json.dumps(summary, indent=1))
with open(out_path, "w") as out:
  json.dump({"model": M, "schema": json.load(open(schema)), "rounds": rounds, "configs": configs,
             "raw": raw, "summary": summary}, out)
