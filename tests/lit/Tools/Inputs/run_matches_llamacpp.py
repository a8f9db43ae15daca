#!/usr/bin/env python3
"""Runs `KVJIT run MODEL -p TEXT -n N --temperature 0 --cache_dtype f16` on the prompts
of tests/data/llamacpp/smollm2_greedy.json (made by llama.cpp, which reads special
tokens in the prompt) and checks that each continuation is llama.cpp's text.

    run_matches_llamacpp.py KVJIT MODEL REFERENCE.json NAME...
"""

import json
import subprocess
import sys

kvjit, model, reference_path, names = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
reference = json.load(open(reference_path, encoding="utf-8"))
prompts = {p["name"]: p for p in reference["prompts"]}
for name in names:
    prompt = prompts[name]
    result = subprocess.run(
        [kvjit, "run", model, "-p", prompt["prompt"], "-n", str(reference["settings"]["n"]),
         "--temperature", "0", "--cache_dtype", "f16"],
        capture_output=True, text=True, check=True)
    if result.stdout != prompt["generated_text"] + "\n":
        sys.exit(f"{name}: kvjit says {result.stdout!r}\nllama.cpp says {prompt['generated_text']!r}")
    print(f"{name}: equal to llama.cpp")
