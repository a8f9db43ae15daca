#!/usr/bin/env python3
"""Times kvjit run's greedy decode with and without speculative decoding, in
interleaved rounds, on prompts whose answer copies its input and on open
chat; checks that every configuration prints the same text, and prints the
median, range and ratio of each configuration's decode tokens/s (from
--stats) with its draft acceptance rate, and writes the raw runs as JSON.

  python3 tools/scripts/bench_speculative.py KVJIT MODEL ROUNDS OUT.json \\
      [NAME=FLAGS ...]

NEW_TOKENS in the environment sets the tokens generated (128). Each
NAME=FLAGS adds a configuration (FLAGS split on spaces, e.g.
"self-draft 8 layers=--speculative layers:8"); without any, the n-gram
lookup's defaults and a longer draft are timed. "plain" (no speculation) is
always the first.
"""
import json
import os
import re
import statistics
import subprocess
import sys

K, M, rounds, out_path = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
new_tokens = os.environ.get("NEW_TOKENS", "128")
prompts = {
  "copy (code edit)": ["-p", "def add(a, b):\n    return a + b\n\ndef sub(a, b):\n    return a - b\n\ndef mul(a, b):\n    return a * b\n\n# The same three functions, with type hints:\n"],
  "copy (chat: JSON edit)": ["--chat", "-p", "Copy the following JSON, changing only the city to Paris: {\"name\": \"Alice Smith\", \"age\": 34, \"city\": \"London\", \"email\": \"alice.smith@example.com\", \"phone\": \"+44 20 7946 0958\"}"],
  "copy (chat: quote)": ["--chat", "-p", "Quote the first sentence of this text exactly: The Eiffel Tower was completed in 1889 for the World's Fair in Paris. It is 330 metres tall and was the tallest structure in the world for 41 years."],
  "open chat": ["--chat", "-p", "Tell me about the history of the bicycle."],
  "open chat (explain)": ["--chat", "-p", "Explain how a refrigerator works."],
}
configs = {"plain": []}
for spec in sys.argv[5:] or ["ngram (defaults: 3 drafts, suffixes 2-3)=--speculative ngram",
                             "ngram, 4 drafts, suffixes 1-3=--speculative ngram --draft_tokens 4 --ngram_min 1"]:
  name, _, flags = spec.partition("=")
  configs[name] = flags.split()


def run(prompt_args, config_args):
  res = subprocess.run([K, "run", M, *prompt_args, "-n", new_tokens, "--temperature", "0", "--stats", *config_args],
                       capture_output=True, text=True)
  if res.returncode != 0:
    sys.exit(f"kvjit run {' '.join(config_args)} failed:\n{res.stderr}")
  return res


# The first run of a configuration may compile its model (and a draft's);
# compiling is not decoding.
for c, cargs in configs.items():
  run(["-p", "Hello"], cargs)
raw = {p: {c: [] for c in configs} for p in prompts}
for r in range(rounds):
  for p, pargs in prompts.items():
    outs = {}
    for c, cargs in configs.items():
      res = run(pargs, cargs)
      m = re.search(r"decode ([0-9.]+) tokens/s", res.stderr)
      a = re.search(r"(\d+) drafted, (\d+) accepted", res.stderr)
      raw[p][c].append({"decode_tok_s": float(m.group(1)), "drafted": int(a.group(1)) if a else 0, "accepted": int(a.group(2)) if a else 0})
      outs[c] = res.stdout
    assert len(set(outs.values())) == 1, (p, "outputs differ")
summary = {}
for p in prompts:
  base = statistics.median(x["decode_tok_s"] for x in raw[p]["plain"])
  for c in configs:
    v = [x["decode_tok_s"] for x in raw[p][c]]
    med = statistics.median(v)
    summary.setdefault(p, {})[c] = {"median": med, "min": min(v), "max": max(v), "ratio": round(med / base, 3),
                                     "accept_rate": round(sum(x["accepted"] for x in raw[p][c]) / max(1, sum(x["drafted"] for x in raw[p][c])), 3)}
print(json.dumps(summary, indent=1))
with open(out_path, "w") as out:
  json.dump({"model": M, "rounds": rounds, "new_tokens": int(new_tokens), "configs": configs, "raw": raw, "summary": summary}, out)
