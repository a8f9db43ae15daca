#!/usr/bin/env python3
"""Perplexity and KL divergence of KV cache types, kvjit beside llama.cpp.

    tools/scripts/perplexity_vs_llamacpp.py --kvjit build/tools/kvjit/kvjit \\
        --llamacpp_bin ~/.cache/kvjit/llama.cpp-native/build-0.3.36/bin \\
        --model ~/.cache/kvjit/models/SmolLM2-135M-Instruct.Q4_1.gguf \\
        --cache_types f32,f16 [--text /usr/share/common-licenses/GPL-3] [--ctx 512] \\
        [--chunks N] [--threads 2] [--flash_attn auto] [-o report.json]

For each cache type, `kvjit perplexity --cache_dtype TYPE` and `llama-perplexity
-ctk TYPE -ctv TYPE` over the same text, context and chunks; both tools chunk
and score alike (docs/perplexity.md), so their figures compare. The first type
is the base: each tool saves its distributions there (kvjit --save_logits,
llama.cpp --kl-divergence-base) and every later type is compared with them
(mean KL divergence and top-token agreement, each against its own tool's base).
Prints a table and the JSON report (also written to -o), with the commit, the
commands and each tool's per-chunk estimates.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Optional

FLOAT = r"([-+]?[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)"


def run(command: List[str]) -> Dict[str, object]:
    """Runs `command`; its stdout and stderr together, and its wall time."""
    with tempfile.TemporaryFile(mode="w+") as output:
        start = time.perf_counter()
        done = subprocess.run(command, stdout=output, stderr=subprocess.STDOUT)
        seconds = time.perf_counter() - start
        output.seek(0)
        text = output.read()
    if done.returncode != 0:
        sys.exit(f"perplexity_vs_llamacpp.py: `{' '.join(command)}` failed "
                 f"({done.returncode}):\n{text[-3000:]}")
    return {"output": text, "wall_s": seconds}


class MissingFigure(Exception):
    pass


def search(pattern: str, text: str, what: str) -> re.Match:
    match = re.search(pattern, text, re.M)
    if not match:
        raise MissingFigure(what)
    return match


def figures(output: str, kl: bool, kvjit: bool) -> Dict[str, object]:
    """Perplexity, its uncertainty and per-chunk estimates; KL figures where compared."""
    if kl and not kvjit:
        # llama.cpp's KL run prints its perplexity in its statistics and per
        # chunk in a table instead.
        final = search(rf"Mean PPL\(Q\)\s+:\s+{FLOAT} ±\s+{FLOAT}", output, "PPL(Q)")
        chunk_ppl = re.findall(rf"^\s*\d+\s+{FLOAT} ±", output, re.M)
    else:
        final = search(rf"Final estimate: PPL = {FLOAT} \+/- {FLOAT}", output, "final estimate")
        chunk_ppl = re.findall(rf"\[\d+\]{FLOAT},", output)
    result: Dict[str, object] = {
        "ppl": float(final.group(1)),
        "ppl_uncertainty": float(final.group(2)),
        "chunk_ppl": [float(v) for v in chunk_ppl],
    }
    if kvjit:
        plan = search(r"(\d+) tokens; (\d+) chunks of (\d+)", output, "chunk plan")
        result["text_tokens"] = int(plan.group(1))
        result["chunks"] = int(plan.group(2))
    else:
        plan = search(r"over (\d+) chunks, n_ctx=(\d+)", output, "chunk plan")
        result["chunks"] = int(plan.group(1))
    if kl:
        if kvjit:
            divergence = search(rf"Mean KLD\s+: {FLOAT} \+/- {FLOAT}", output, "mean KLD")
            same_top = search(rf"Same top token\s+: {FLOAT} \+/- {FLOAT} %", output, "top token")
        else:
            divergence = search(rf"Mean\s+KLD:\s+{FLOAT} ± \s*{FLOAT}", output, "mean KLD")
            same_top = search(rf"Same top p:\s+{FLOAT} ± \s*{FLOAT} %", output, "top token")
        result["mean_kld"] = float(divergence.group(1))
        result["mean_kld_uncertainty"] = float(divergence.group(2))
        result["same_top_percent"] = float(same_top.group(1))
        result["same_top_uncertainty"] = float(same_top.group(2))
    return result


def measure(command: List[str], kl: bool, kvjit: bool) -> Dict[str, object]:
    """The figures of one run, and its wall time."""
    # llama.cpp's log thread sometimes loses its last lines when the process
    # exits (its final estimate among them); such a run is run again.
    for attempt in range(3):
        print(f"{os.path.basename(command[0])} ... (attempt {attempt + 1})", file=sys.stderr, flush=True)
        done = run(command)
        try:
            return {**figures(done["output"], kl, kvjit), "wall_s": done["wall_s"]}
        except MissingFigure as missing:
            lost = missing.args[0]
    sys.exit(f"perplexity_vs_llamacpp.py: no {lost} in three runs of `{' '.join(command)}`")


def commit(root: str) -> Optional[str]:
    done = subprocess.run(["git", "-C", root, "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True)
    return done.stdout.strip() if done.returncode == 0 else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kvjit", required=True, help="the kvjit binary")
    parser.add_argument("--llamacpp_bin", required=True, help="the folder of llama-perplexity")
    parser.add_argument("--model", required=True, help="the GGUF model")
    parser.add_argument("--text", default="/usr/share/common-licenses/GPL-3")
    parser.add_argument("--ctx", type=int, default=512)
    parser.add_argument("--chunks", type=int, default=-1, help="-1: every whole chunk")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--cache_types", default="f32,f16",
                        help="comma-separated; the first is the base the others are compared with")
    parser.add_argument("--flash_attn", default="auto", choices=["auto", "on", "off"],
                        help="llama.cpp's -fa (a quantized V cache needs it on)")
    parser.add_argument("-o", "--output", help="also write the JSON report here")
    args = parser.parse_args()

    kvjit = os.path.abspath(args.kvjit)
    llama = os.path.join(args.llamacpp_bin, "llama-perplexity")
    cache_types = [t for t in args.cache_types.split(",") if t]
    chunks = ["--chunks", str(args.chunks)] if args.chunks > 0 else []
    report: Dict[str, object] = {
        "model": os.path.abspath(args.model), "text": os.path.abspath(args.text), "ctx": args.ctx,
        "chunks_requested": args.chunks, "threads": args.threads,
        "kvjit_commit": commit(os.path.dirname(os.path.abspath(__file__))), "results": [],
    }
    with tempfile.TemporaryDirectory(prefix="perplexity_vs_llamacpp.") as scratch:
        kvjit_base = os.path.join(scratch, "kvjit-base.logits")
        llama_base = os.path.join(scratch, "llama-base.kld")
        for index, cache_type in enumerate(cache_types):
            compared = index > 0
            kvjit_command = [kvjit, "perplexity", args.model, "-f", args.text, "--ctx", str(args.ctx),
                             "--threads", str(args.threads), "--cache_dtype", cache_type, *chunks,
                             "--kl_divergence" if compared else "--save_logits", kvjit_base]
            llama_command = [llama, "-m", args.model, "-f", args.text, "-c", str(args.ctx),
                             "-t", str(args.threads), "-ctk", cache_type, "-ctv", cache_type,
                             "-fa", args.flash_attn, *chunks, "--kl-divergence-base", llama_base]
            if compared:
                llama_command.append("--kl-divergence")
            entry: Dict[str, object] = {"cache_type": cache_type}
            for name, command, is_kvjit in (("kvjit", kvjit_command, True),
                                            ("llama.cpp", llama_command, False)):
                entry[name] = {**measure(command, compared, is_kvjit), "command": command}
            kvjit_ppl, llama_ppl = entry["kvjit"]["ppl"], entry["llama.cpp"]["ppl"]
            entry["ppl_relative_difference"] = (kvjit_ppl - llama_ppl) / llama_ppl
            report["results"].append(entry)

    print(f"{'cache':<8} {'kvjit PPL':>20} {'llama.cpp PPL':>20} {'diff':>8} "
          f"{'kvjit KLD':>10} {'llama KLD':>10} {'kvjit top1':>11} {'llama top1':>11}")
    for entry in report["results"]:
        k, l = entry["kvjit"], entry["llama.cpp"]
        kl_columns = (f"{k['mean_kld']:>10.6f} {l['mean_kld']:>10.6f} "
                      f"{k['same_top_percent']:>10.3f}% {l['same_top_percent']:>10.3f}%"
                      if "mean_kld" in k else f"{'(base)':>10} {'(base)':>10}")
        print(f"{entry['cache_type']:<8} {k['ppl']:>9.4f} ± {k['ppl_uncertainty']:<8.5f} "
              f"{l['ppl']:>9.4f} ± {l['ppl_uncertainty']:<8.5f} "
              f"{100 * entry['ppl_relative_difference']:>+7.3f}% {kl_columns}")
    text = json.dumps(report, indent=2)
    print(text)
    if args.output:
        with open(args.output, "w") as out:
            out.write(text + "\n")


if __name__ == "__main__":
    main()
