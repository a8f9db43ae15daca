#!/usr/bin/env python3
"""Per run of run.sh: ms per step of KvAttention and of the linears, in
prefill (pp128), batch-1 decode and 16 concurrent decodes."""
import gzip
import json


def ops(path, phase):
    profile = json.load(gzip.open(path))["engines"][0]["profile"]["phases"][phase]
    return {op["name"]: op["ms_per_step"] for op in profile["ops"]}


print("| round | binary | prefill attention / linears | decode attention / linears | 16 decodes attention / linears |")
print("|---|---|---:|---:|---:|")
for r in (1, 2, 3):
    for binary in ("old", "new"):
        cells = []
        for path, phase in ((f"att-{binary}-b1-{r}.json.gz", "prefill"), (f"att-{binary}-b1-{r}.json.gz", "decode"),
                            (f"att-{binary}-b16-{r}.json.gz", "decode")):
            o = ops(path, phase)
            cells.append(f"{o['KvAttention']:.2f} / {o['Linear']:.2f}")
        print(f"| {r} | {binary} | " + " | ".join(cells) + " |")
