"""Tensor parallelism on one machine, its two ranks processes on loopback that
`--tp 2` starts with mpirun (docs/scale-out.md): greedy text, beams and 16
batched requests equal one process's; SmolLM2's distributions within the
stated KL divergence of one process's; `kvjit serve` answers the openai
client; each rank holds about half the weights; and a rank that dies or hangs
ends the whole job with a message, within a bounded time.

Runs on SmolLM2 (the downloaded model) and stories260K (--stories).

Split sums round differently, and SmolLM2's 8-bit activations turn that into
a quantization step now and then, as an f16 KV cache does (docs/numerics.md,
"Tensor parallelism"): over 16 prompts, 8 kept one process's greedy text for
32 tokens. The held prompts are those 8; a wrong split changes them all."""

from __future__ import annotations

import concurrent.futures
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import unittest
from typing import Dict, List

import serve_harness
from serve_harness import Server

STORIES = ""
# Held prompts: stories for the small model, instructions for SmolLM2.
STORY_PROMPTS = ["Once upon a time", "The little dog", "Lily and Tom went to the park", "One day"]
SMOLLM2_PROMPTS = ["The capital of France is", "Water boils at", "My favorite food is",
                   "To make a cup of tea,", "The sun rises in the", "Photosynthesis is the process",
                   "A haiku about the sea:", "The best way to learn is"]
# The KL divergence of the split model's distributions from one process's,
# per token, and how often their top tokens agree: an f16 KV cache's cost on
# SmolLM2 (docs/benchmarks.md: 0.0039 and 96%) with room to spare.
MAX_MEAN_KLD = 0.01
MIN_SAME_TOP_TOKEN = 90.0


def run(model: str, *flags: str, command: str = "run") -> str:
    """What `kvjit run` prints, its final newline dropped; bounded, as every rank is."""
    output = subprocess.run([serve_harness.KVJIT, command, model, *flags], capture_output=True,
                            text=True, timeout=180)
    if output.returncode != 0:
        raise AssertionError(f"kvjit {command} {model} {flags} failed: {output.stderr}")
    return output.stdout[:-1]


def ranks_of(server: Server) -> Dict[int, int]:
    """The pids of the ranks mpirun started for `server`, by rank."""
    ranks = {}
    children = subprocess.run(["pgrep", "-P", str(server.process.pid)], capture_output=True,
                              text=True).stdout.split()
    for pid in children:
        with open(f"/proc/{pid}/environ", "rb") as environ:
            for entry in environ.read().split(b"\0"):
                if entry.startswith(b"OMPI_COMM_WORLD_RANK="):
                    ranks[int(entry.split(b"=")[1])] = int(pid)
    return ranks


def forget_weight_references(pid: int) -> None:
    """Clears the accessed bits of `pid`'s pages, so that smaps' Referenced
    counts only what it touches from here on."""
    with open(f"/proc/{pid}/clear_refs", "w") as clear_refs:
        clear_refs.write("1")


def referenced_weight_bytes(pid: int) -> int:
    """Bytes of the weight files (the model's, the sidecars) that `pid` has
    touched since forget_weight_references. Not Rss: a page fault maps the
    file's pages around it that are already in the page cache (fault-around,
    and whole large folios on some file systems), and the other rank and the
    whole process put all of them there, so Rss counts pages a rank never reads."""
    total = 0
    counting = False
    with open(f"/proc/{pid}/smaps") as smaps:
        for line in smaps:
            fields = line.split()
            if "-" in fields[0] and len(fields) >= 5:
                counting = len(fields) >= 6 and fields[5].endswith((".gguf", ".kvw"))
            elif counting and fields[0] == "Referenced:":
                total += int(fields[1]) * 1024
    return total


def complete(server: Server, prompt: str, max_tokens: int = 24, **extra) -> str:
    status, _, body = server.post_json("/v1/completions", {
        "prompt": prompt, "max_tokens": max_tokens, "temperature": 0, **extra})
    assert status == 200, (status, body)
    return body["choices"][0]["text"]


def wait_for_exit(server: Server, timeout_s: float) -> float:
    start = time.monotonic()
    server.process.wait(timeout=timeout_s)
    return time.monotonic() - start


class TensorParallelTest(unittest.TestCase):
    def test_greedy_text_equals_one_process(self):
        for model, prompts in ((STORIES, STORY_PROMPTS), (serve_harness.MODEL, SMOLLM2_PROMPTS)):
            for prompt in prompts:
                with self.subTest(model=os.path.basename(model), prompt=prompt):
                    flags = ("-p", prompt, "-n", "32", "--temperature", "0")
                    self.assertEqual(run(model, "--tp", "2", *flags), run(model, *flags))

    def test_distributions_within_the_stated_kl_divergence(self):
        text = os.path.join(os.path.dirname(__file__), "../../../../docs/design.md")
        flags = ("-f", text, "--ctx", "256", "--chunks", "6")
        with tempfile.TemporaryDirectory() as folder:
            saved = os.path.join(folder, "one.logits")
            run(serve_harness.MODEL, *flags, "--save_logits", saved, command="perplexity")
            report = subprocess.run(
                [serve_harness.KVJIT, "perplexity", serve_harness.MODEL, "--tp", "2", *flags,
                 "--kl_divergence", saved], capture_output=True, text=True, timeout=300)
        self.assertEqual(report.returncode, 0, report.stderr)
        kld = float(re.search(r"Mean KLD\s*: ([0-9.]+)", report.stdout + report.stderr).group(1))
        same = float(re.search(r"Same top token\s*: ([0-9.]+)",
                               report.stdout + report.stderr).group(1))
        print(f"mean KLD {kld}, same top token {same}%", flush=True)
        self.assertLess(kld, MAX_MEAN_KLD)
        self.assertGreater(same, MIN_SAME_TOP_TOKEN)

    def test_beams_equal_one_process(self):
        flags = ("-p", "Once upon a time", "-n", "24", "--beams", "3", "--num_return", "3")
        self.assertEqual(run(STORIES, "--tp", "2", *flags), run(STORIES, *flags))

    def test_sixteen_served_requests_equal_one_process(self):
        prompts = [f"{prompt} {i}" for i in range(4) for prompt in STORY_PROMPTS]
        self.assertEqual(len(prompts), 16)
        split, whole = Server("--tp", "2", model=STORIES), Server(model=STORIES)
        try:
            with concurrent.futures.ThreadPoolExecutor(len(prompts)) as pool:
                split_texts = list(pool.map(lambda p: complete(split, p, 48), prompts))
                whole_texts = list(pool.map(lambda p: complete(whole, p, 48), prompts))
            self.assertEqual(split_texts, whole_texts)
        finally:
            split.close()
            whole.close()

    def test_serve_answers_the_openai_client_with_half_the_weights_per_rank(self):
        import openai
        split, whole = Server("--tp", "2"), Server()
        try:
            for server in (split, whole):
                complete(server, "The capital of France is", 16)
            client = openai.OpenAI(base_url=f"{split.url}/v1", api_key="none")
            reply = client.chat.completions.create(
                model=client.models.list().data[0].id, messages=[{"role": "user", "content": "Say hello."}],
                max_tokens=16, temperature=0)
            self.assertTrue(reply.choices[0].message.content)
            # Each rank maps the model file and its own sidecar, and a request
            # touches about half of the weights: its heads, its feed-forward
            # columns, its rows of the output (the embedding's rows only as
            # the prompt's tokens need them).
            ranks = ranks_of(split)
            self.assertEqual(sorted(ranks), [0, 1])
            for pid in [whole.process.pid, *ranks.values()]:
                forget_weight_references(pid)
            for server in (split, whole):
                complete(server, "The capital of France is", 4)
            whole_bytes = referenced_weight_bytes(whole.process.pid)
            self.assertGreater(whole_bytes, 0)
            for rank, pid in ranks.items():
                share = referenced_weight_bytes(pid) / whole_bytes
                print(f"rank {rank}: {share:.2f} of the weights one process touches", flush=True)
                self.assertLess(share, 0.65, f"rank {rank}")
                self.assertGreater(share, 0.3, f"rank {rank}")
        finally:
            split.close()
            whole.close()

    def test_a_killed_rank_ends_the_job_with_a_message(self):
        server = Server("--tp", "2", model=STORIES)
        try:
            os.kill(ranks_of(server)[1], signal.SIGKILL)
            self.assertLess(wait_for_exit(server, timeout_s=60), 60)
            self.assertNotEqual(server.process.returncode, 0)
            self.assertRegex(server.stderr(), r"rank 1 .*(exited on signal 9|Killed)")
        finally:
            server.close()

    def test_a_hung_rank_ends_the_job_within_the_collective_timeout(self):
        os.environ["KVJIT_COLLECTIVE_TIMEOUT_S"] = "5"
        try:
            server = Server("--tp", "2", model=STORIES)
        finally:
            del os.environ["KVJIT_COLLECTIVE_TIMEOUT_S"]
        try:
            os.kill(ranks_of(server)[1], signal.SIGSTOP)
            with concurrent.futures.ThreadPoolExecutor(1) as pool:
                pool.submit(lambda: server.post_json("/v1/completions", {
                    "prompt": "Once upon a time", "max_tokens": 8}))
                self.assertLess(wait_for_exit(server, timeout_s=60), 60)
            self.assertNotEqual(server.process.returncode, 0)
            self.assertRegex(server.stderr(), r"not every rank arrived within 5s; rank 1 may have "
                                              r"died or hung")
        finally:
            for pid in ranks_of(server).values():
                os.kill(pid, signal.SIGKILL)
            server.close()


if __name__ == "__main__":
    if "--stories" in sys.argv:
        at = sys.argv.index("--stories")
        STORIES = sys.argv[at + 1]
        del sys.argv[at:at + 2]
    if not STORIES or not os.path.isfile(STORIES):
        serve_harness.skip(f"needs stories260K.gguf (--stories {STORIES!r}, ../shared/models)")
    serve_harness.main()
