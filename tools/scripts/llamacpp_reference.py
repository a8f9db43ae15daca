#!/usr/bin/env python3
"""Reference outputs from llama.cpp (through llama-cpp-python) for kvjit's tests.

Run it with the reference venv's python (tools/scripts/reference_env.sh prints it):

    PY=$(tools/scripts/reference_env.sh | tail -n1)
    $PY tools/scripts/llamacpp_reference.py tokenize MODEL.gguf \
        --cases tests/data/llamacpp/smollm2_tokenize_cases.json -o OUT.json
    $PY tools/scripts/llamacpp_reference.py greedy MODEL.gguf \
        --prompts tests/data/llamacpp/smollm2_greedy_prompts.json -n 32 -o OUT.json

tokenize: for every text, the ids of
    llm.tokenize(text.encode(), add_bos=False, special=False)   -> ids_no_bos
    llm.tokenize(text.encode(), add_bos=True,  special=True)    -> ids_with_special
  (the model is loaded with vocab_only=True). add_bos=True only adds a BOS when the
  model's metadata asks for one (tokenizer.ggml.add_bos_token).

greedy: for every prompt, the prompt is tokenised with add_special = the model's
  add-BOS flag and parse_special=True, decoded with llama_decode, and the next N
  tokens are chosen by argmax over the logits (temperature 0 / top-k 1; ties go to
  the lowest id, as llama.cpp's greedy sampler does). Generation does not stop at
  an end-of-generation token unless --stop-at-eog is given. The top-k logits of
  every step are recorded too.

bench: prefill and decode speed at batch 1 (`kvjit bench` runs it beside its own).

bench-load: the requests of `kvjit bench --requests` (it writes them to a file) through
  llama.cpp's batched decoding, one sequence id per sample, under the same per-step
  token budget; TTFT / TPOT percentiles and output tokens/s as JSON.

--cases: a JSON list of strings, or a text file with one case per line.
--prompts: a JSON list of strings, or of objects {"name": ..., "text": ...}.
"""

from __future__ import annotations

import argparse
import ctypes
import hashlib
import json
import os
import platform
import sys
from typing import Any, Dict, List, Optional, Tuple


def _import_llama_cpp():
    try:
        import llama_cpp  # noqa: F401
    except ImportError as e:  # pragma: no cover - environment problem
        sys.exit(
            "llamacpp_reference.py: error: cannot import llama_cpp "
            f"({e}).\nRun it with the reference venv's python: "
            "PY=$(tools/scripts/reference_env.sh | tail -n1); $PY "
            + " ".join(sys.argv)
        )
    return llama_cpp


llama_cpp = _import_llama_cpp()

_LOG_CB = None  # keep the ctypes callback alive


def quiet_logs(verbose: bool) -> None:
    """Silence llama.cpp's own log output unless --verbose."""
    global _LOG_CB
    if verbose:
        return

    def _cb(level, text, user_data):  # noqa: ARG001
        return None

    _LOG_CB = llama_cpp.llama_log_callback(_cb)
    llama_cpp.llama_log_set(_LOG_CB, ctypes.c_void_p(0))


def sha256_file(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def versions() -> Dict[str, Any]:
    info = {
        "llama_cpp_python_version": llama_cpp.__version__,
        "python_version": platform.python_version(),
        "machine": platform.machine(),
    }
    try:
        info["llama_cpp_system_info"] = (
            llama_cpp.llama_print_system_info().decode("utf-8", "replace").strip()
        )
    except Exception:  # pragma: no cover
        pass
    return info


def meta_str(model, key: str) -> Optional[str]:
    buf = ctypes.create_string_buffer(1 << 16)
    n = llama_cpp.llama_model_meta_val_str(model, key.encode(), buf, len(buf))
    if n < 0:
        return None
    return buf.value.decode("utf-8", "replace")


def vocab_info(model, vocab) -> Dict[str, Any]:
    n_vocab = llama_cpp.llama_vocab_n_tokens(vocab)

    def tid(x: int) -> Optional[int]:
        return None if x < 0 else int(x)

    eog = [i for i in range(n_vocab) if llama_cpp.llama_vocab_is_eog(vocab, i)]
    return {
        "n_vocab": int(n_vocab),
        "tokenizer_model": meta_str(model, "tokenizer.ggml.model"),
        "tokenizer_pre": meta_str(model, "tokenizer.ggml.pre"),
        "add_bos": bool(llama_cpp.llama_vocab_get_add_bos(vocab)),
        "add_eos": bool(llama_cpp.llama_vocab_get_add_eos(vocab)),
        "bos_id": tid(llama_cpp.llama_vocab_bos(vocab)),
        "eos_id": tid(llama_cpp.llama_vocab_eos(vocab)),
        "eot_id": tid(llama_cpp.llama_vocab_eot(vocab)),
        "eog_ids": eog,
    }


def token_text(vocab, tok: int) -> str:
    """The token's vocabulary string (for byte-level BPE the GPT-2 byte-mapped
    form, e.g. 'Ġthe'), always valid UTF-8."""
    return llama_cpp.llama_vocab_get_text(vocab, tok).decode("utf-8", "replace")


def detokenize(vocab, ids: List[int], special: bool) -> str:
    if not ids:
        return ""
    arr = (llama_cpp.llama_token * len(ids))(*ids)
    cap = 64 + 32 * len(ids)
    while True:
        buf = ctypes.create_string_buffer(cap)
        n = llama_cpp.llama_detokenize(vocab, arr, len(ids), buf, cap, False, special)
        if n >= 0:
            return buf.raw[:n].decode("utf-8", "replace")
        cap = -n + 16


def load_list(path: str, what: str) -> List[Any]:
    try:
        with open(path, "r", encoding="utf-8") as f:
            raw = f.read()
    except OSError as e:
        sys.exit(f"llamacpp_reference.py: error: cannot read {what} file {path}: {e}")
    if path.endswith(".json"):
        try:
            data = json.loads(raw)
        except json.JSONDecodeError as e:
            sys.exit(f"llamacpp_reference.py: error: {path} is not valid JSON: {e}")
        if not isinstance(data, list):
            sys.exit(f"llamacpp_reference.py: error: {path} must hold a JSON list")
        return data
    return raw.split("\n")[:-1] if raw.endswith("\n") else raw.split("\n")


def check_model(path: str) -> None:
    if not os.path.isfile(path):
        sys.exit(f"llamacpp_reference.py: error: model file not found: {path}")


def load_model_on_cpu(path: str):
    """The model (all layers on the CPU), its vocabulary and the vocabulary's size."""
    mparams = llama_cpp.llama_model_default_params()
    mparams.n_gpu_layers = 0
    model = llama_cpp.llama_model_load_from_file(path.encode(), mparams)
    if not model:
        sys.exit(f"llamacpp_reference.py: error: llama.cpp could not load {path}")
    vocab = llama_cpp.llama_model_get_vocab(model)
    return model, vocab, llama_cpp.llama_vocab_n_tokens(vocab)


CACHE_TYPES = {"f32": "GGML_TYPE_F32", "f16": "GGML_TYPE_F16", "q8_0": "GGML_TYPE_Q8_0"}


def context_params(args: argparse.Namespace, n_ctx: int, n_seq_max: int = 1):
    """llama.cpp's context parameters with every setting a comparison depends on set
    explicitly (its defaults change between versions): threads, batch, ubatch, flash
    attention, K and V cache type."""
    cparams = llama_cpp.llama_context_default_params()
    cparams.n_ctx = n_ctx
    cparams.n_batch = args.n_batch
    cparams.n_ubatch = args.n_ubatch or args.n_batch
    cparams.n_seq_max = n_seq_max
    cparams.n_threads = args.threads
    cparams.n_threads_batch = args.threads
    cparams.flash_attn_type = (
        llama_cpp.LLAMA_FLASH_ATTN_TYPE_ENABLED if args.flash_attn == "on" else llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED
    )
    cache_type = getattr(llama_cpp, CACHE_TYPES[args.cache_type])
    cparams.type_k = cache_type
    cparams.type_v = cache_type
    return cparams


def context_settings(args: argparse.Namespace, cparams) -> Dict[str, Any]:
    """What a measurement ran with, for its JSON: the context's settings and the build."""
    stamp = os.path.join(sys.prefix, "kvjit-llama-cpp-build.txt")
    build = open(stamp, encoding="utf-8").read().strip() if os.path.isfile(stamp) else "unknown"
    return {
        "n_ctx": int(cparams.n_ctx),
        "n_batch": int(cparams.n_batch),
        "n_ubatch": int(cparams.n_ubatch),
        "n_seq_max": int(cparams.n_seq_max),
        "n_threads": int(cparams.n_threads),
        "n_threads_batch": int(cparams.n_threads_batch),
        "flash_attn": args.flash_attn,
        "kv_cache_type": args.cache_type,
        "build": build,
        **versions(),
    }


def add_context_arguments(parser: argparse.ArgumentParser, n_batch: int) -> None:
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--n-batch", type=int, default=n_batch, help="tokens one llama_decode carries")
    parser.add_argument("--n-ubatch", type=int, default=0, help="physical batch; 0: --n-batch")
    parser.add_argument("--flash-attn", choices=["on", "off"], default="off")
    parser.add_argument("--cache-type", choices=sorted(CACHE_TYPES), default="f16", help="K and V cache type")


def write_json(obj: Any, out: str) -> None:
    text = json.dumps(obj, ensure_ascii=False, indent=1) + "\n"
    if out == "-":
        sys.stdout.write(text)
    else:
        with open(out, "w", encoding="utf-8") as f:
            f.write(text)
        print(f"wrote {out}", file=sys.stderr)


# --------------------------------------------------------------------------- tokenize


def cmd_tokenize(args: argparse.Namespace) -> None:
    check_model(args.model)
    cases = load_list(args.cases, "cases")
    for c in cases:
        if not isinstance(c, str):
            sys.exit(f"llamacpp_reference.py: error: case {c!r} is not a string")

    from llama_cpp import Llama

    llm = Llama(model_path=args.model, vocab_only=True, verbose=args.verbose)
    vocab = llm._model.vocab
    out_cases = []
    for text in cases:
        ids_no_bos = llm.tokenize(text.encode("utf-8"), add_bos=False, special=False)
        ids_with_special = llm.tokenize(text.encode("utf-8"), add_bos=True, special=True)
        out_cases.append(
            {
                "text": text,
                "ids_no_bos": [int(t) for t in ids_no_bos],
                "ids_with_special": [int(t) for t in ids_with_special],
                "tokens_no_bos": [token_text(vocab, t) for t in ids_no_bos],
            }
        )
    result = {
        "generator": "tools/scripts/llamacpp_reference.py tokenize",
        "model": os.path.basename(args.model),
        "model_sha256": sha256_file(args.model),
        **versions(),
        "vocab": vocab_info(llm._model.model, vocab),
        "calls": {
            "ids_no_bos": "llm.tokenize(text.encode(), add_bos=False, special=False)",
            "ids_with_special": "llm.tokenize(text.encode(), add_bos=True, special=True)",
            "tokens_no_bos": "llama_vocab_get_text of each id in ids_no_bos",
        },
        "cases": out_cases,
    }
    write_json(result, args.output)


# --------------------------------------------------------------------------- greedy


def cmd_greedy(args: argparse.Namespace) -> None:
    import numpy as np

    check_model(args.model)
    prompts_raw = load_list(args.prompts, "prompts")
    prompts = []
    for i, p in enumerate(prompts_raw):
        if isinstance(p, str):
            prompts.append({"name": f"prompt{i}", "text": p})
        elif isinstance(p, dict) and isinstance(p.get("text"), str):
            prompts.append({"name": p.get("name", f"prompt{i}"), "text": p["text"]})
        else:
            sys.exit(f"llamacpp_reference.py: error: bad prompt entry {p!r}")

    quiet_logs(args.verbose)
    llama_cpp.llama_backend_init()

    model, vocab, n_vocab = load_model_on_cpu(args.model)

    args.n_batch = args.n_batch or args.n_ctx
    if args.n_batch < args.n_ctx:
        sys.exit("llamacpp_reference.py: error: greedy decodes a prompt in one batch: --n-batch must be >= --n-ctx")
    cparams = context_params(args, args.n_ctx)
    ctx = llama_cpp.llama_init_from_model(model, cparams)
    if not ctx:
        sys.exit("llamacpp_reference.py: error: llama_init_from_model failed")

    add_bos = bool(llama_cpp.llama_vocab_get_add_bos(vocab))

    def tokenize(text: str) -> List[int]:
        data = text.encode("utf-8")
        cap = len(data) + 8
        arr = (llama_cpp.llama_token * cap)()
        n = llama_cpp.llama_tokenize(vocab, data, len(data), arr, cap, add_bos, True)
        if n < 0:
            cap = -n
            arr = (llama_cpp.llama_token * cap)()
            n = llama_cpp.llama_tokenize(vocab, data, len(data), arr, cap, add_bos, True)
        if n < 0:
            sys.exit(f"llamacpp_reference.py: error: tokenize failed for {text!r}")
        return [int(arr[i]) for i in range(n)]

    def decode(ids: List[int]) -> np.ndarray:
        arr = (llama_cpp.llama_token * len(ids))(*ids)
        batch = llama_cpp.llama_batch_get_one(arr, len(ids))
        rc = llama_cpp.llama_decode(ctx, batch)
        if rc != 0:
            sys.exit(f"llamacpp_reference.py: error: llama_decode returned {rc}")
        ptr = llama_cpp.llama_get_logits_ith(ctx, -1)
        return np.ctypeslib.as_array(ptr, shape=(n_vocab,)).astype(np.float32).copy()

    results = []
    for p in prompts:
        llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(ctx), True)
        prompt_ids = tokenize(p["text"])
        if len(prompt_ids) + args.n > args.n_ctx:
            sys.exit(f"llamacpp_reference.py: error: prompt {p['name']} + n exceeds n_ctx")
        logits = decode(prompt_ids)
        gen: List[int] = []
        steps = []
        first_eog = None
        for step in range(args.n):
            order = np.argsort(-logits, kind="stable")[: args.top_k]
            tok = int(order[0])  # stable argsort: lowest id wins a tie
            assert logits[tok] == logits.max()
            steps.append(
                {
                    "top_ids": [int(t) for t in order],
                    "top_logits": [float(logits[t]) for t in order],
                }
            )
            gen.append(tok)
            is_eog = bool(llama_cpp.llama_vocab_is_eog(vocab, tok))
            if is_eog and first_eog is None:
                first_eog = step
                if args.stop_at_eog:
                    break
            if step + 1 < args.n:
                logits = decode([tok])
        margins = [s["top_logits"][0] - s["top_logits"][1] for s in steps]
        results.append(
            {
                "name": p["name"],
                "prompt": p["text"],
                "prompt_ids": prompt_ids,
                "generated_ids": gen,
                "generated_tokens": [token_text(vocab, t) for t in gen],
                "generated_text": detokenize(vocab, gen, special=True),
                "full_text": detokenize(vocab, prompt_ids + gen, special=True),
                "first_eog_step": first_eog,
                "min_top1_top2_margin": float(min(margins)) if margins else None,
                "steps": steps,
            }
        )
        print(f"[{p['name']}] {results[-1]['generated_text']!r}", file=sys.stderr)

    result = {
        "generator": "tools/scripts/llamacpp_reference.py greedy",
        "model": os.path.basename(args.model),
        "model_sha256": sha256_file(args.model),
        **versions(),
        "vocab": vocab_info(model, vocab),
        "settings": {
            "n": args.n,
            "n_ctx": args.n_ctx,
            "seed": args.seed,
            "sampling": "greedy argmax over llama_get_logits_ith(ctx, -1) "
            "(temperature 0 / top_k 1; seed unused by argmax)",
            "prompt_tokenize": f"llama_tokenize(add_special={add_bos} (model's add_bos flag), "
            "parse_special=True)",
            "prompt_decode": "one llama_decode of the whole prompt, then one token per step",
            **context_settings(args, cparams),
            "stop_at_eog": args.stop_at_eog,
            "top_k_recorded": args.top_k,
            "text_fields": "llama_detokenize(..., unparse_special=True)",
        },
        "prompts": results,
    }
    write_json(result, args.output)

    llama_cpp.llama_free(ctx)
    llama_cpp.llama_model_free(model)


def cmd_bench(args: argparse.Namespace) -> None:
    """Prefill and decode speed at batch 1, measured the way `kvjit bench` measures its own:
    one prefill of --prompt-tokens tokens (one llama_decode: --n-batch must hold them), then
    --gen-tokens decode steps of one token each, after one warm-up run of the same. One
    measurement: `kvjit bench` runs this once per run, interleaved with its own."""
    import time

    if args.n_batch < args.prompt_tokens:
        sys.exit("llamacpp_reference.py: error: --n-batch must hold the prompt (one prefill step)")
    quiet_logs(False)
    llama_cpp.llama_backend_init()
    model, vocab, n_vocab = load_model_on_cpu(args.model)
    cparams = context_params(args, args.prompt_tokens + args.gen_tokens + 8)
    ctx = llama_cpp.llama_init_from_model(model, cparams)
    if not ctx:
        sys.exit("llamacpp_reference.py: error: llama_init_from_model failed")
    memory = llama_cpp.llama_get_memory(ctx)
    prompt = [(17 + 31 * i) % n_vocab for i in range(args.prompt_tokens)]
    batch = llama_cpp.llama_batch_init(max(args.prompt_tokens, 1), 0, 1)

    def decode(tokens: List[int], first_position: int) -> None:
        for i, token in enumerate(tokens):
            batch.token[i] = token
            batch.pos[i] = first_position + i
            batch.n_seq_id[i] = 1
            batch.seq_id[i][0] = 0
            batch.logits[i] = i == len(tokens) - 1
        batch.n_tokens = len(tokens)
        rc = llama_cpp.llama_decode(ctx, batch)
        if rc != 0:
            sys.exit(f"llamacpp_reference.py: error: llama_decode returned {rc}")
        # Reading the logits is part of a step, as it is of kvjit's.
        llama_cpp.llama_get_logits_ith(ctx, len(tokens) - 1)

    def run() -> Tuple[float, float]:
        llama_cpp.llama_memory_clear(memory, True)
        start = time.perf_counter()
        decode(prompt, 0)
        prefill_s = time.perf_counter() - start
        token = prompt[-1]
        start = time.perf_counter()
        for g in range(args.gen_tokens):
            decode([token], args.prompt_tokens + g)
        return prefill_s, time.perf_counter() - start

    run()  # the warm-up
    prefill_s, decode_s = run()
    json.dump(
        {
            "engine": "llama.cpp",
            "model": os.path.basename(args.model),
            "prompt_tokens": args.prompt_tokens,
            "gen_tokens": args.gen_tokens,
            "prefill_tokens_per_s": args.prompt_tokens / prefill_s,
            "decode_tokens_per_s": args.gen_tokens / decode_s,
            "ttft_ms": prefill_s * 1e3,
            "tpot_ms": decode_s / args.gen_tokens * 1e3,
            "settings": context_settings(args, cparams),
        },
        sys.stdout,
    )
    sys.stdout.write("\n")
    llama_cpp.llama_batch_free(batch)
    llama_cpp.llama_free(ctx)
    llama_cpp.llama_model_free(model)


def cmd_bench_load(args: argparse.Namespace) -> None:
    """Many requests at once through llama.cpp's batched decoding (as its `parallel`
    example does): every sample has its own sequence id in one unified KV cache; each
    llama_decode carries one token of every decoding sequence, then prompt chunks,
    up to --n-batch tokens. A request of N samples prefills its prompt once,
    on its first sequence, and copies that sequence's cache to the others
    (llama_memory_seq_cp). Tokens are chosen by argmax (the work per token is that of
    any sampler). Reports what `kvjit bench --requests` reports, as JSON."""
    import time

    import numpy as np

    with open(args.requests_file, encoding="utf-8") as f:
        requests = json.load(f)["requests"]
    n_seq = sum(int(r.get("samples", 1)) for r in requests)
    n_ctx = sum(int(r.get("samples", 1)) * (len(r["prompt"]) + int(r["max_new_tokens"])) for r in requests)
    budget = args.n_batch

    quiet_logs(args.verbose)
    llama_cpp.llama_backend_init()
    model, vocab, n_vocab = load_model_on_cpu(args.model)
    cparams = context_params(args, n_ctx + 16, n_seq_max=n_seq)
    if hasattr(cparams, "kv_unified"):
        cparams.kv_unified = True
    ctx = llama_cpp.llama_init_from_model(model, cparams)
    if not ctx:
        sys.exit("llamacpp_reference.py: error: llama_init_from_model failed")
    memory = llama_cpp.llama_get_memory(ctx)
    batch = llama_cpp.llama_batch_init(budget, 0, 1)

    # Per request: its first sequence id, prompt progress, and per sample the
    # generated tokens and their times.
    states = []
    next_seq = 0
    for r in requests:
        samples = int(r.get("samples", 1))
        states.append(
            {
                "prompt": [int(t) for t in r["prompt"]],
                "max_new": int(r["max_new_tokens"]),
                "seqs": list(range(next_seq, next_seq + samples)),
                "fed": 0,
                "tokens": [[] for _ in range(samples)],
                "times": [[] for _ in range(samples)],
            }
        )
        next_seq += samples

    start = time.perf_counter()
    steps = 0
    while True:
        n = 0
        rows = []  # (state, sample index or None for a prompt's last chunk)

        def add(token: int, pos: int, seq: int, logits: bool) -> None:
            nonlocal n
            batch.token[n] = token
            batch.pos[n] = pos
            batch.n_seq_id[n] = 1
            batch.seq_id[n][0] = seq
            batch.logits[n] = logits
            n += 1

        for st in states:  # decodes first, as kvjit's scheduler does
            if st["fed"] < len(st["prompt"]):
                continue
            for i, seq in enumerate(st["seqs"]):
                toks = st["tokens"][i]
                if 0 < len(toks) < st["max_new"] and n < budget:
                    rows.append((st, i, n))
                    add(toks[-1], len(st["prompt"]) + len(toks) - 1, seq, True)
        for st in states:  # then prompt chunks, in request order
            left = len(st["prompt"]) - st["fed"]
            if left == 0 or n >= budget:
                continue
            count = min(left, budget - n)
            for k in range(count):
                pos = st["fed"] + k
                last = pos == len(st["prompt"]) - 1
                if last:
                    rows.append((st, None, n))
                add(st["prompt"][pos], pos, st["seqs"][0], last)
            st["fed"] += count
        if n == 0:
            break
        batch.n_tokens = n
        rc = llama_cpp.llama_decode(ctx, batch)
        if rc != 0:
            sys.exit(f"llamacpp_reference.py: error: llama_decode returned {rc}")
        steps += 1
        now = time.perf_counter()
        for st, sample, row in rows:
            ptr = llama_cpp.llama_get_logits_ith(ctx, row)
            token = int(np.argmax(np.ctypeslib.as_array(ptr, shape=(n_vocab,))))
            if sample is None:  # the prompt is in: every sample takes its first token
                for seq in st["seqs"][1:]:
                    llama_cpp.llama_memory_seq_cp(memory, st["seqs"][0], seq, -1, -1)
                for i in range(len(st["seqs"])):
                    st["tokens"][i].append(token)
                    st["times"][i].append(now)
            else:
                st["tokens"][sample].append(token)
                st["times"][sample].append(now)
    seconds = time.perf_counter() - start

    ttft_ms, tpot_ms = [], []
    generated = 0
    for st in states:
        ttft_ms.append((min(t[0] for t in st["times"]) - start) * 1e3)
        per_sample = [(t[-1] - t[0]) / (len(t) - 1) * 1e3 for t in st["times"] if len(t) > 1]
        tpot_ms.append(sum(per_sample) / len(per_sample) if per_sample else 0.0)
        generated += sum(len(t) for t in st["tokens"])

    def percentile(values: List[float], fraction: float) -> float:
        ordered = sorted(values)
        return ordered[min(int(fraction * (len(ordered) - 1) + 0.5), len(ordered) - 1)]

    json.dump(
        {
            "engine": "llama.cpp",
            "model": os.path.basename(args.model),
            "requests": len(requests),
            "sequences": n_seq,
            "prompt_tokens": sum(len(st["prompt"]) for st in states),
            "generated_tokens": generated,
            "max_batch_tokens": budget,
            "seconds": seconds,
            "ttft_ms_p50": percentile(ttft_ms, 0.5),
            "ttft_ms_p99": percentile(ttft_ms, 0.99),
            "tpot_ms_p50": percentile(tpot_ms, 0.5),
            "tpot_ms_p99": percentile(tpot_ms, 0.99),
            "output_tokens_per_s": generated / seconds,
            "steps": steps,
            "kv_cells": int(cparams.n_ctx),
            "settings": context_settings(args, cparams),
        },
        sys.stdout,
    )
    sys.stdout.write("\n")
    llama_cpp.llama_batch_free(batch)
    llama_cpp.llama_free(ctx)
    llama_cpp.llama_model_free(model)


def main(argv: Optional[List[str]] = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)

    t = sub.add_parser("tokenize", help="token ids of test strings")
    t.add_argument("model")
    t.add_argument("--cases", required=True, help="JSON list of strings, or one per line")
    t.add_argument("-o", "--output", required=True, help="output JSON ('-' for stdout)")
    t.add_argument("--verbose", action="store_true")
    t.set_defaults(func=cmd_tokenize)

    g = sub.add_parser("greedy", help="greedy continuation ids of prompts")
    g.add_argument("model")
    g.add_argument("--prompts", required=True, help="JSON list of strings or {name,text}")
    g.add_argument("-n", type=int, default=32, help="tokens to generate per prompt")
    g.add_argument("-o", "--output", required=True, help="output JSON ('-' for stdout)")
    g.add_argument("--n-ctx", type=int, default=512)
    add_context_arguments(g, n_batch=0)  # 0: --n-ctx
    g.add_argument("--seed", type=int, default=1234)
    g.add_argument("--top-k", type=int, default=5, help="logits recorded per step")
    g.add_argument("--stop-at-eog", action="store_true")
    g.add_argument("--verbose", action="store_true")
    g.set_defaults(func=cmd_greedy)

    b = sub.add_parser("bench", help="prefill and decode tokens/s at batch 1, as JSON")
    b.add_argument("model")
    b.add_argument("--prompt-tokens", type=int, default=128)
    b.add_argument("--gen-tokens", type=int, default=64)
    add_context_arguments(b, n_batch=512)
    b.set_defaults(func=cmd_bench)

    bl = sub.add_parser("bench-load", help="many requests at once, batched by sequence id, as JSON")
    bl.add_argument("model")
    bl.add_argument(
        "--requests-file",
        required=True,
        help='JSON {"requests": [{"prompt": [token ids], "max_new_tokens": G, "samples": N}, ...]}',
    )
    add_context_arguments(bl, n_batch=256)
    bl.add_argument("--verbose", action="store_true")
    bl.set_defaults(func=cmd_bench_load)

    args = ap.parse_args(argv)
    args.func(args)


if __name__ == "__main__":
    main()
