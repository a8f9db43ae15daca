"""`kvjit serve --speculative ngram`: the server speculates for every request.
Concurrent greedy completions of prompts that repeat themselves (so that the
n-gram lookup drafts) equal what `kvjit run` prints for each alone, and the
speculative-decoding counters on /metrics, named as vLLM names them, rise
with every batch of requests; so does the layer-skipping self-draft; a
server without --speculative counts none."""

from __future__ import annotations

import concurrent.futures
import time
import unittest

import serve_harness
from serve_harness import Server

MAX_TOKENS = 48
DRAFTS = "kvjit_spec_decode_num_drafts_total"
DRAFT_TOKENS = "kvjit_spec_decode_num_draft_tokens_total"
ACCEPTED = "kvjit_spec_decode_num_accepted_tokens_total"


def prompts():
    names = ["Lily", "Tom", "Sue", "Ben", "Max", "Mia"]
    return [f"Once upon a time, {name} had a red ball. Once upon a time, {name} had a"
            for name in names]


def summary_line(server):
    """The server's line naming its model and settings on stderr, which its
    reader thread may still be reading; an on-the-fly compile's lines (of
    the model or a draft) may come before it."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        for line in server.stderr().splitlines():
            if line.startswith("kvjit serve: "):
                return line
        time.sleep(0.01)
    return ""


def complete_all(server, texts):
    def complete(prompt):
        status, _, body = server.post_json(
            "/v1/completions", {"prompt": prompt, "max_tokens": MAX_TOKENS, "temperature": 0})
        assert status == 200, body
        return body["choices"][0]["text"]

    with concurrent.futures.ThreadPoolExecutor(len(texts)) as pool:
        return list(pool.map(complete, texts))


class SpeculativeServeTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = Server("--speculative", "ngram", "--draft_tokens", "4")

    @classmethod
    def tearDownClass(cls):
        cls.server.close()

    def test_the_first_line_names_the_speculation(self):
        self.assertIn("speculative ngram (4 draft tokens, while at most 8 sequences decode)",
                      summary_line(self.server))

    def test_greedy_text_is_unchanged_and_the_counters_rise(self):
        texts = prompts()
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            solo = list(pool.map(lambda p: serve_harness.solo_run(p, MAX_TOKENS), texts))
        before = self.server.metrics()
        for round_ in range(2):
            self.assertEqual(complete_all(self.server, texts), solo, f"round {round_}")
            after = self.server.metrics()
            for name in (DRAFTS, DRAFT_TOKENS, ACCEPTED):
                self.assertGreater(after[name], before[name], f"{name}, round {round_}")
            self.assertLessEqual(after[ACCEPTED], after[DRAFT_TOKENS])
            self.assertLessEqual(after[DRAFTS], after[DRAFT_TOKENS])
            before = after
        self.assertEqual(self.server.wait_for_metric("kvjit_kv_blocks_used", lambda v: v == 0), 0)


class SelfDraftServeTest(unittest.TestCase):
    """The layer-skipping self-draft (the model's first 3 layers, over the
    server's own KV pool) drafts for requests alone in their steps (in a
    batch the policy finds its steps too dear on a CPU), and concurrent
    requests' greedy text is unchanged; every block comes back."""

    def test_greedy_text_is_unchanged_with_the_self_draft(self):
        server = Server("--speculative", "layers:3", "--draft_tokens", "3")
        try:
            self.assertIn("speculative layers:3", summary_line(server))
            texts = prompts()[:4]
            with concurrent.futures.ThreadPoolExecutor(4) as pool:
                solo = list(pool.map(lambda p: serve_harness.solo_run(p, MAX_TOKENS), texts))
            self.assertEqual([complete_all(server, [text])[0] for text in texts], solo)
            self.assertGreater(server.metrics()[DRAFT_TOKENS], 0)
            self.assertEqual(complete_all(server, texts), solo)
            metrics = server.metrics()
            self.assertLessEqual(metrics[ACCEPTED], metrics[DRAFT_TOKENS])
            self.assertEqual(server.wait_for_metric("kvjit_kv_blocks_used", lambda v: v == 0), 0)
        finally:
            server.close()


class WithoutSpeculationTest(unittest.TestCase):
    def test_no_counter_moves(self):
        server = Server()
        try:
            self.assertIn("no speculative decoding", summary_line(server))
            complete_all(server, prompts()[:2])
            metrics = server.metrics()
            for name in (DRAFTS, DRAFT_TOKENS, ACCEPTED):
                self.assertEqual(metrics[name], 0, name)
        finally:
            server.close()


if __name__ == "__main__":
    serve_harness.main(needs_openai=False)
