#!/usr/bin/env python3
"""Times speculative decoding in the in-flight batching scheduler: `kvjit
bench --requests_json` with 1, 4 and 16 concurrent requests whose answers
copy their prompts and with open prompts, each configuration in interleaved
rounds; prints each cell's median output tokens/s (min-max), its ratio to
plain decoding, the drafts made and taken and the scheduler's steps, and
writes the raw reports' figures as JSON.

  python3 tools/scripts/bench_speculative_batched.py KVJIT MODEL ROUNDS OUT.json \\
      [NAME=FLAGS ...]

Each NAME=FLAGS adds a configuration (FLAGS split on spaces); without any,
the n-gram lookup with its defaults. "plain" is always the first.
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile

K, M, rounds, out_path = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
configs = {"plain": []}
for spec in sys.argv[5:] or ["ngram=--speculative ngram"]:
  name, _, flags = spec.partition("=")
  configs[name] = flags.split()

SUBJECTS = ["the lighthouse keeper", "the baker", "the old sailor", "the gardener", "the young pilot",
            "the librarian", "the fisherman", "the painter", "the teacher", "the doctor", "the farmer",
            "the clockmaker", "the miner", "the poet", "the shepherd", "the tailor"]


def copy_prompt(subject):
  sentence = f"{subject} climbed the spiral stairs every evening to light the lamp before the ships came home"
  text = (f"Every day {sentence}. On Mondays {sentence}, and on Fridays {sentence} too. "
          f"People in town said that {sentence} better than anyone else.")
  return f"Text: {text}\n\nThe same text, copied exactly:\n"


def open_prompt(subject):
  return f"Write a short story about {subject} and a stray dog who becomes a friend."


sets = {"copy": copy_prompt, "open": open_prompt}
counts = [1, 4, 16]
workdir = tempfile.mkdtemp(prefix="kvjit-spec-batched-")
request_files = {}
for set_name, prompt in sets.items():
  for n in counts:
    path = os.path.join(workdir, f"{set_name}{n}.json")
    with open(path, "w") as f:
      json.dump([{"prompt": prompt(SUBJECTS[i]), "max_new_tokens": 64} for i in range(n)], f)
    request_files[set_name, n] = path

FIELDS = ["output_tokens_per_s", "drafted_tokens", "accepted_tokens", "steps", "generated_tokens"]


def run(requests_path, flags):
  report = os.path.join(workdir, "report.json")
  res = subprocess.run([K, "bench", M, "--requests_json", requests_path, "--runs", "1", "--bench_threads", "2",
                        "--bench_cache_dtypes", "f32", "--report_json", report, *flags],
                       capture_output=True, text=True)
  if res.returncode != 0:
    sys.exit(f"kvjit bench {' '.join(flags)} failed:\n{res.stderr}")
  with open(report) as f:
    summary = json.load(f)["engines"][0]["summary"]
  return {field: summary[field]["median"] for field in FIELDS}


raw = {f"{s} x{n}": {c: [] for c in configs} for s in sets for n in counts}
for r in range(rounds):
  for s in sets:
    for n in counts:
      for c, flags in configs.items():
        raw[f"{s} x{n}"][c].append(run(request_files[s, n], flags))
summary = {}
for cell, by_config in raw.items():
  base = statistics.median(x["output_tokens_per_s"] for x in by_config["plain"])
  for c, runs in by_config.items():
    v = [x["output_tokens_per_s"] for x in runs]
    summary.setdefault(cell, {})[c] = {
        "median": round(statistics.median(v), 1), "min": round(min(v), 1), "max": round(max(v), 1),
        "ratio": round(statistics.median(v) / base, 3), "drafted": runs[0]["drafted_tokens"],
        "accepted": runs[0]["accepted_tokens"], "steps": runs[0]["steps"]}
print(json.dumps(summary, indent=1))
with open(out_path, "w") as out:
  json.dump({"model": M, "rounds": rounds, "configs": configs, "raw": raw, "summary": summary}, out)
