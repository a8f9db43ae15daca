#!/usr/bin/env python3
"""Runs `KVJIT run MODEL -p TEXT -n N --temperature 0 --cache_dtype f16` on the prompts
of a llama.cpp greedy reference (tools/scripts/llamacpp_reference.py, which reads
special tokens in the prompt, as kvjit run does) and checks that each continuation is
llama.cpp's text (both decoded from UTF-8 with U+FFFD for what is not). Where llama.cpp generated an end-of-generation token within N (the
reference goes on past it; kvjit run stops there), the text before it is compared.

    run_matches_llamacpp.py KVJIT MODEL REFERENCE.json [NAME...]   (all prompts without NAMEs)
"""

import json
import subprocess
import sys

kvjit, model, reference_path, names = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
reference = json.load(open(reference_path, encoding="utf-8"))
prompts = {p["name"]: p for p in reference["prompts"]}
for name in names or list(prompts):
    prompt = prompts[name]
    expected = prompt["generated_text"]
    eog_step = prompt.get("first_eog_step")
    if eog_step is not None:
        expected = expected.split(prompt["generated_tokens"][eog_step])[0]
    result = subprocess.run(
        [kvjit, "run", model, "-p", prompt["prompt"], "-n", str(reference["settings"]["n"]),
         "--temperature", "0", "--cache_dtype", "f16"],
        capture_output=True)
    if result.returncode != 0:
        sys.exit(f"{model} {name}: kvjit run failed ({result.returncode}):\n"
                 f"{result.stderr.decode('utf-8', 'replace')}")
    # Random weights make byte tokens that are not UTF-8; the reference keeps
    # its text with U+FFFD for them, as this does.
    said = result.stdout.decode("utf-8", "replace")
    if said != expected + "\n":
        sys.exit(f"{model} {name}: kvjit says {said!r}\nllama.cpp says {expected!r}")
    print(f"{model.rsplit('/', 1)[-1]} {name}: equal to llama.cpp")
